"""The seeds' scope kept in the shard: roots and the seeds' hosts across a restart,
and a shard kept before the seeds' hosts were."""

from __future__ import annotations

from pathlib import Path

from ubipy.config import BoundsConfig, Scope
from ubipy.peer.scopesharing import _SEEDS_META, keep_scope, load_scope
from ubipy.store.admission import Admission
from ubipy.store.shard import NewURL, Shard

BOUNDS = BoundsConfig(scope=Scope.HOST)


def test_the_roots_and_the_seeds_hosts_are_kept(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    scope = load_scope(shard, BOUNDS)
    assert scope.seeds == scope.roots == frozenset()
    scope.add_seed("http://10.0.0.5:8080/")
    scope.add_roots(["b.test"], ["b.test:81"])
    with shard.transaction():
        keep_scope(shard, scope)
    again = load_scope(shard, BOUNDS)
    assert again.seeds == {"10.0.0.5:8080", "b.test:81"}
    assert again.roots == {"10.0.0.5", "b.test"}
    assert again.seeded("10.0.0.5:8080") and not again.seeded("10.0.0.5:7000")


def test_a_shard_from_before_takes_the_hosts_of_its_depth_0_urls_once(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    Admission(shard, recent_size=4, bloom_capacity=1000).admit(
        [
            NewURL(fp=1, url="http://10.0.0.5/", host="10.0.0.5", depth=0),
            NewURL(fp=2, url="http://a.test/x", host="a.test", depth=1),
        ]
    )
    assert shard.get_meta(_SEEDS_META) is None
    assert load_scope(shard, BOUNDS).seeds == {"10.0.0.5"}
    assert shard.get_meta(_SEEDS_META) == "10.0.0.5"
