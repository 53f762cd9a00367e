"""The seeds' scope kept in the shard (roots and the seeds' hosts across a restart, and
a shard kept before the seeds' hosts were, and one a full disk refused), and sent
again until acknowledged."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import httpx2
import pytest
import trio
import trio.testing

from ubipy.config import BoundsConfig, CrawlConfig, Scope
from ubipy.errors import StorageError
from ubipy.membership import ChangeKind, Member, MemberEvent, MemberState
from ubipy.peer.crawler import Crawler
from ubipy.peer.scopesharing import _SEEDS_META, ScopeSharing, keep_scope, load_scope
from ubipy.store.admission import Admission
from ubipy.store.shard import NewURL, Shard
from ubipy.wire import Scope as ScopeFrame
from ubipy.wire import ScopeAck

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
            # A seed's redirect to a cloud's metadata service kept the seed's depth:
            # not a seed for it.
            NewURL(fp=3, url="http://169.254.169.254/", host="169.254.169.254", depth=0),
            NewURL(fp=4, url="http://[fe80::1]:81/", host="[fe80::1]:81", depth=0),
        ]
    )
    assert shard.get_meta(_SEEDS_META) is None
    assert load_scope(shard, BOUNDS).seeds == {"10.0.0.5"}
    assert shard.get_meta(_SEEDS_META) == "10.0.0.5"


async def test_a_scope_frame_that_could_not_be_sent_is_sent_again(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """To a member of an earlier version (which acknowledges nothing): until written."""
    sent: list[tuple[float, ScopeFrame]] = []

    async def send(address: str, message: object) -> bool:
        assert address == "b:7000" and isinstance(message, ScopeFrame)
        sent.append((trio.current_time(), message))
        return sum(m == message for _, m in sent) > 2  # each fails twice

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b"], _b)
        before = crawler.scope_now()
        crawler.scope.add_seed("http://a.test/")
        sharing.seeded(before)
    # The roots' frame and the hosts' frame each failed twice: sent at 0, 1 and 3 s.
    assert sorted(t for t, _ in sent) == [0.0, 0.0, 1.0, 1.0, 3.0, 3.0]
    assert {m for _, m in sent} == {ScopeFrame(("a.test",)), ScopeFrame((), ("a.test",))}


async def test_no_scope_frame_is_sent_again_to_a_member_gone_meanwhile(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    live = {"b"}
    sent: list[float] = []

    async def send(address: str, message: object) -> bool:
        sent.append(trio.current_time())
        return False  # never sent

    async def leaves() -> None:
        await trio.sleep(10.0)  # during the last back-off, from 7 s to 15 s
        live.discard("b")

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(leaves)
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: sorted(live), _b)
        before = crawler.scope_now()
        crawler.scope.add_seed("http://a.test/")
        sharing.seeded(before)
    assert sorted(set(sent)) == [0.0, 1.0, 3.0, 7.0]  # not at 15 s, gone since 10


async def test_a_scope_frame_is_sent_until_acknowledged_by_a_member_that_acknowledges(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Sent, but not acknowledged (lost on a connection that broke, or the receiver's
    disk full): sent again, ever less often, for as long as the member is live, once
    it is known to acknowledge (here: the roots' frame at once, the hosts' frame at
    its eighth copy)."""
    sent: list[tuple[float, ScopeFrame]] = []

    async def send(address: str, message: object) -> bool:
        assert isinstance(message, ScopeFrame)
        sent.append((trio.current_time(), message))
        if message.roots or sum(m == message for _, m in sent) == 8:
            nursery.start_soon(sharing._on_scope_ack, "b", ScopeAck(message.digest), _no_reply)
        return True

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b"], _b)
        sharing.heard("b:7000", [11])  # SCOPE_ACK
        before = crawler.scope_now()
        crawler.scope.add_seed("http://a.test/")
        sharing.seeded(before)
    assert [t for t, m in sent if m.roots] == [0.0]
    # Waits of 1, 2, 4, 8 and 16 s, then 30 s at most.
    assert [t for t, m in sent if not m.roots] == [0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 61.0, 91.0]


async def test_a_scope_frame_due_again_while_on_its_way_is_sent_at_once_with_its_tries_afresh(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b (of an earlier version) cannot be reached until 20 s, and is heard from again
    at 14 s: what it missed is due again, the same frames. Their first sending had one
    try left; it used to swallow the new one, and give up at 15 s."""
    sent: list[tuple[float, ScopeFrame]] = []

    async def send(address: str, message: object) -> bool:
        assert isinstance(message, ScopeFrame)
        sent.append((trio.current_time(), message))
        return trio.current_time() >= 20.0

    async def refuted_at_14() -> None:
        await trio.sleep(14.0)
        sharing.member_changed(MemberEvent(ChangeKind.REFUTED, _member(MemberState.ALIVE), 14.0))

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b"], _b)
        sharing.member_changed(MemberEvent(ChangeKind.SUSPECT, _member(MemberState.SUSPECT), 0.0))
        before = crawler.scope_now()
        crawler.scope.add_roots(["a.test"])
        sharing.seeded(before)
        nursery.start_soon(refuted_at_14)
    assert [t for t, _ in sent] == [0.0, 1.0, 3.0, 7.0, 14.0, 15.0, 17.0, 21.0]


async def test_a_scope_frame_follows_its_member_to_a_new_address(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b is not answering at b:7000 when the seeds come, and is then at b:7001 (restarted
    on a new address, or the one of two peers under one id that stayed), without a
    death or a join: its frame was held to the old address, and given up there once
    that was no live member's."""
    sent: list[tuple[float, str]] = []
    where = {"b": "b:7000"}

    async def send(address: str, message: object) -> bool:
        sent.append((trio.current_time(), address))
        if address == "b:7001":
            assert isinstance(message, ScopeFrame)
            nursery.start_soon(sharing._on_scope_ack, "b", ScopeAck(message.digest), _no_reply)
        return address == "b:7001"

    async def moves_at_5() -> None:
        await trio.sleep(5.0)
        where["b"] = "b:7001"
        sharing.heard("b:7001", [11])  # SCOPE_ACK

    crawler = Scoped(tmp_path)
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b"], where.get)
        nursery.start_soon(moves_at_5)
        before = crawler.scope_now()
        crawler.scope.add_roots(["a.test"])
        sharing.seeded(before)
    assert sent == [(0.0, "b:7000"), (1.0, "b:7000"), (3.0, "b:7000"), (7.0, "b:7001")]


def _member(state: MemberState) -> Member:
    return Member("b", "b:7000", state, 1)


async def test_a_scope_frame_to_a_member_not_heard_from_yet_is_sent_again_once_it_is(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """A joiner learnt of through another member's gossip is sent the scope before
    either has had a membership frame from the other: neither knows yet that the other
    takes SCOPE_ACK, so it is not acknowledged. Heard from at 2 s, the joiner is sent
    the frame again (at 3 s), and acknowledges it."""
    sent: list[float] = []

    async def send(address: str, message: object) -> bool:
        assert isinstance(message, ScopeFrame)
        sent.append(trio.current_time())
        if trio.current_time() >= 2.0:  # the joiner has heard from this peer too
            nursery.start_soon(sharing._on_scope_ack, "b", ScopeAck(message.digest), _no_reply)
        return True

    async def heard_at_2() -> None:
        await trio.sleep(2.0)
        sharing.heard("b:7000", [11])

    crawler = Scoped(tmp_path)
    crawler.scope.add_roots(["a.test"])
    async with trio.open_nursery() as nursery:
        sharing = ScopeSharing(crawler, send, nursery.start_soon, lambda: ["b"], _b)
        nursery.start_soon(heard_at_2)
        sharing.share("b")
    assert sent == [0.0, 3.0]


async def test_a_scope_a_full_disk_refused_is_saved_when_it_comes_again(tmp_path: Path) -> None:
    """Taken in memory but not saved (the frame goes unacknowledged): the frame comes
    again with nothing new in it, and is saved then, not lost at the next restart."""
    shard = Shard.open(tmp_path)
    async with httpx2.AsyncClient() as client:
        crawler = Crawler(CrawlConfig(data_dir=tmp_path, bounds=BOUNDS), shard, client)
        shard._conn.execute("PRAGMA query_only = ON")
        with pytest.raises(StorageError):
            crawler.add_scope_roots(["b.test"], ["b.test:81"])
        shard._conn.execute("PRAGMA query_only = OFF")
        assert not crawler.add_scope_roots(["b.test"], ["b.test:81"])  # nothing new
        assert not crawler.add_scope_roots(["b.test"], ["b.test:81"])
    shard.close()
    again = load_scope(Shard.open(tmp_path), BOUNDS)
    assert (again.roots, again.seeds) == (frozenset({"b.test"}), frozenset({"b.test:81"}))


def _b(peer_id: str) -> str | None:
    return {"b": "b:7000"}.get(peer_id)


async def _no_reply(message: object) -> None:
    raise AssertionError("an acknowledgement is not answered")


class Scoped:
    """The crawler's side of the scope, with a shard of its own."""

    def __init__(self, data: Path) -> None:
        self.scope = load_scope(Shard.open(data), BOUNDS)

    def scope_now(self) -> tuple[frozenset[str], frozenset[str]]:
        return self.scope.roots, self.scope.seeds

    def add_scope_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        return self.scope.add_roots(roots, seeds)
