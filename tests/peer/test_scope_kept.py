"""The seeds' scope kept in the shard (roots and the seeds' hosts across a restart, and
a shard kept before the seeds' hosts were), and sent again when a send failed."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import trio
import trio.testing

from ubipy.config import BoundsConfig, Scope
from ubipy.peer.scopesharing import _SEEDS_META, ScopeSharing, keep_scope, load_scope
from ubipy.store.admission import Admission
from ubipy.store.shard import NewURL, Shard
from ubipy.wire import Scope as ScopeFrame

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


async def test_a_scope_frame_that_could_not_be_sent_is_sent_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    sent: list[tuple[float, ScopeFrame]] = []

    async def send(address: str, message: object) -> bool:
        assert address == "b:7000" and isinstance(message, ScopeFrame)
        sent.append((trio.current_time(), message))
        return sum(m == message for _, m in sent) > 2  # each fails twice

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b:7000"])
        before = crawler.scope_now()
        crawler.scope.add_seed("http://a.test/")
        sharing.seeded(before)
    # The roots' frame and the hosts' frame each failed twice: sent at 0, 1 and 3 s.
    assert sorted(t for t, _ in sent) == [0.0, 0.0, 1.0, 1.0, 3.0, 3.0]
    assert {m for _, m in sent} == {ScopeFrame(("a.test",)), ScopeFrame((), ("a.test",))}


async def test_no_scope_frame_is_sent_again_to_a_member_gone_meanwhile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    live = {"b:7000"}
    sent: list[float] = []

    async def send(address: str, message: object) -> bool:
        sent.append(trio.current_time())
        return False  # never sent

    async def leaves() -> None:
        await trio.sleep(10.0)  # during the last back-off, from 7 s to 15 s
        live.discard("b:7000")

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(leaves)
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: sorted(live))
        before = crawler.scope_now()
        crawler.scope.add_seed("http://a.test/")
        sharing.seeded(before)
    assert sorted(set(sent)) == [0.0, 1.0, 3.0, 7.0]  # not at 15 s, gone since 10


class Scoped:
    """The crawler's side of the scope, with a shard of its own."""

    def __init__(self, data: Path) -> None:
        self.scope = load_scope(Shard.open(data), BOUNDS)

    def scope_now(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.scope.roots, self.scope.seeds

    def add_scope_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        return self.scope.add_roots(roots, seeds)
