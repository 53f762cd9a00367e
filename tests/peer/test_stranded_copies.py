"""A host moved by a join but never handed over, its old owner dead (``--replicas 2``):
the old owner's successor hands its copy of the host to the owner, and the owner holds
the host until that hand-off can have come (tests/cluster/test_stranded_copies.py is
the whole cluster's version)."""

from __future__ import annotations

import time
from pathlib import Path

import trio
import trio.testing

from tests.peer.test_handoff import FENCE, asked, crawler_at
from ubipy.fetch.urls import fingerprint
from ubipy.peer.handoff import Handoff
from ubipy.peer.replica import Replicator
from ubipy.ring import Ring
from ubipy.wire import Handoff as HandoffFrame
from ubipy.wire import HandoffDone, Message, Replica

BEFORE = Ring(["b", "c"])  # b owns the host, c keeps its copy
JOINED = Ring(["a", "b", "c"])  # a joined: the host is a's
AFTER = Ring(["a", "c"])  # b died before it handed the host to a
HOST = next(
    h
    for i in range(10_000)
    if BEFORE.owner(h := f"h{i:04d}.synth.test") == "b" and JOINED.owner(h) == "a"
)
PENDING = f"http://{HOST}/next.html"
DONE = f"http://{HOST}/"


def _copy_from_b() -> Replica:
    mark = [time.time(), 1.0, 1]
    return Replica.from_wire(
        {"hosts": [[HOST, [[PENDING, 1]], [fingerprint(DONE)], mark]], "seq": 0}
    )


async def _unused(address: str, message: Message) -> bool:
    raise AssertionError(f"nothing is sent here: {message}")


async def _dones(address: str, message: Message) -> bool:
    assert isinstance(message, HandoffDone), message  # a sweep's: nothing to hand
    return True


async def test_a_copy_from_a_peer_gone_goes_to_the_hosts_owner(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """c holds b's copy of the host; b is gone and the host is a's: c's sweep hands the
    copy to a (its URL pending, its page done), and the next sweep does not again."""
    frames: list[HandoffFrame] = []
    async with crawler_at(tmp_path / "a") as a, crawler_at(tmp_path / "c") as c:
        at_a = Handoff("a", a, _unused, lambda peer: f"{peer}:1", copies=2)
        at_a.ring_changed(AFTER, frozenset(AFTER.members), frozenset(AFTER.members))
        copies = Replicator("c", 2, c, c._shard, _unused, lambda peer: f"{peer}:1")
        copies.receive(_copy_from_b(), "b")
        at_c: Handoff

        async def send(address: str, message: Message) -> bool:
            if isinstance(message, HandoffFrame):
                assert address == "a:1"
                frames.append(message)
                at_a.receive(message)
                at_c.acked(message.id)
            return True

        at_c = Handoff("c", c, send, lambda peer: f"{peer}:1", copies=2, copies_here=copies)
        at_c.ring_changed(AFTER, frozenset(AFTER.members), frozenset(AFTER.members))
        assert await at_c.sweep()
        assert frames == []  # b is not known to be gone: this may be a partial view
        at_c.peer_gone("b")
        assert await at_c.sweep()
        assert [f.host for f in frames] == [HOST]
        pending, done, mark = a._shard.host_state(HOST)
        assert [u.url for u in pending] == [PENDING]
        assert done == [fingerprint(DONE)]
        assert mark is not None
        # c is a's successor for the host: the rows stay, as a's copy, named a's no more.
        assert c._shard.replica_hosts() == [HOST]
        assert copies.strays(AFTER, {"b"}) == []
        assert await at_c.sweep()
        assert len(frames) == 1


async def test_a_copy_handed_to_an_owner_whose_successor_is_another_goes(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Where another peer is the owner's successor, c keeps nothing of the host once
    the owner has it (the owner's commits copy it there)."""
    after = Ring(["a", "c", "d"])
    host = next(
        h
        for i in range(10_000)
        if BEFORE.owner(h := f"h{i:04d}.synth.test") == "b" and after.successors(h, 2) == ["a", "d"]
    )
    async with crawler_at(tmp_path) as c:
        copies = Replicator("c", 2, c, c._shard, _unused, lambda peer: f"{peer}:1")
        copies.receive(Replica.from_wire({"hosts": [[host, [[f"http://{host}/", 0]], []]]}), "b")
        assert copies.strays(after, {"b"}) == [host]
        copies.receive(Replica.from_wire({"hosts": [[host, [], [1]]]}), "a")
        copies.stray_handed(host, after)
        assert c._shard.replica_hosts() == []
        assert copies.strays(after, {"b"}) == []


async def test_a_host_gained_from_a_peer_that_died_waits_for_the_others_sweep(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """a joined and gained the host from b, which died before its sweep: the host is
    held until c, which may hold b's copy of it, has swept under the ring without b,
    past the fence (a fetched b's pages again once the fence was over)."""
    async with crawler_at(tmp_path) as crawler, trio.open_nursery() as nursery:
        handoff = Handoff("a", crawler, _dones, lambda peer: f"{peer}:1", fence=FENCE, copies=2)
        nursery.start_soon(handoff.run)
        handoff.ring_changed(BEFORE, frozenset(BEFORE.members), frozenset(BEFORE.members))
        crawler.ring_changed(JOINED)
        handoff.ring_changed(JOINED, frozenset(JOINED.members), frozenset(JOINED.members))
        crawler.seed([f"http://{HOST}/"])
        handoff.release_from("c", JOINED.key)
        assert asked(crawler) == set()  # b has not swept
        crawler.ring_changed(AFTER)
        handoff.ring_changed(AFTER, frozenset(AFTER.members), frozenset(AFTER.members))
        handoff.peer_gone("b")
        await trio.sleep(FENCE + 1)
        assert asked(crawler) == set()  # c has not swept under AFTER
        handoff.release_from("c", AFTER.key)
        assert asked(crawler) == {HOST}
        nursery.cancel_scope.cancel()


async def test_a_peer_that_swept_leaves_no_stale_copies_to_hand_on_at_its_death(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b handed the host to a and said so (HANDOFF_DONE under the ring that gives it
    to a): c's copy from b is stale and goes, and b's death later hands nothing (every
    such copy went to its owner, one hand-off each). A DONE of a ring c has left since,
    for a host c's ring gives b again, does not drop c's copy of it."""
    async with crawler_at(tmp_path) as c:
        copies = Replicator("c", 2, c, c._shard, _unused, lambda peer: f"{peer}:1")
        copies.receive(_copy_from_b(), "b")
        copies.ring_changed(BEFORE)  # c's ring: the host is b's
        await copies.swept("b", JOINED.key)
        assert c._shard.replica_hosts() == [HOST]
        copies.ring_changed(JOINED)
        await copies.swept("b", JOINED.key)
        assert c._shard.replica_hosts() == []
        assert copies.strays(AFTER, {"b"}) == []


async def test_a_copy_from_a_peer_whose_leave_ran_out_is_taken_over_here(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b left without saying it had handed everything over (its leave ran out of time),
    and the ring gives the host to c, which holds b's copy of it: c's sweep takes the
    host over from the copy (a death's copies are taken over by promote; a leave's
    were left in the table for good)."""
    after = Ring(["c"])
    async with crawler_at(tmp_path) as c:
        copies = Replicator("c", 2, c, c._shard, _unused, lambda peer: f"{peer}:1")
        copies.receive(_copy_from_b(), "b")
        at_c = Handoff("c", c, _dones, lambda peer: f"{peer}:1", copies=2, copies_here=copies)
        at_c.ring_changed(after, frozenset({"c"}), frozenset({"b", "c"}))  # b left
        assert await at_c.sweep()
        pending, done, _ = c._shard.host_state(HOST)
        assert [u.url for u in pending] == [PENDING] and done == [fingerprint(DONE)]
        assert c._shard.replica_hosts() == []


async def _holds_after_deaths(tmp: Path, copies: int) -> int:
    """Holds left after a newcomer's join and eight deaths a second apart in a cluster
    of twelve, no sweep answered."""
    peers = [f"p{i:02d}" for i in range(12)]
    async with crawler_at(tmp) as crawler:
        handoff = Handoff(
            "a", crawler, _dones, lambda peer: f"{peer}:1", fence=FENCE, copies=copies
        )
        before, joined = Ring(peers), Ring(["a", *peers])
        handoff.ring_changed(before, frozenset(peers), frozenset(peers), sweep=False)
        handoff.ring_changed(joined, frozenset(joined.members), frozenset(joined.members))
        alive = set(joined.members)
        for dead in peers[:8]:
            alive.discard(dead)
            ring = Ring(alive)
            handoff.ring_changed(ring, frozenset(alive), frozenset(alive), sweep=False)
            handoff.peer_gone(dead)
            await trio.sleep(1)
        return len(handoff._holds)


async def test_staggered_deaths_do_not_multiply_the_holds(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """Each death copies the holds that waited for the dead peer (for the fence and,
    with replicas, for the sweeps of its copies' holders); the holds made for a death's
    copies are not copied again at the next death, or they doubled at each (1,532 after
    eight deaths, each looked through for every held host: a review)."""
    without = await _holds_after_deaths(tmp_path / "one", 1)
    with_copies = await _holds_after_deaths(tmp_path / "two", 2)
    assert with_copies <= 2 * without


async def test_a_done_forgets_the_senders_stale_copies_under_this_peers_ring(
    tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    """b's HANDOFF_DONE under the ring that gives the host to a reaches c: at once if c
    has that ring, else once c's ring is that too (a DONE of another ring drops
    nothing: b may have made fresh copies since)."""
    for done_first in (False, True):
        async with crawler_at(tmp_path / str(done_first)) as c, trio.open_nursery() as nursery:
            copies = Replicator("c", 2, c, c._shard, _unused, lambda peer: f"{peer}:1")
            copies.receive(_copy_from_b(), "b")
            at_c = Handoff("c", c, _dones, lambda peer: f"{peer}:1", copies=2, copies_here=copies)
            nursery.start_soon(at_c.run)
            await trio.testing.wait_all_tasks_blocked()  # running, as a peer's is
            at_c.ring_changed(BEFORE, frozenset(BEFORE.members), frozenset(BEFORE.members))
            copies.ring_changed(BEFORE)

            done = HandoffDone(JOINED.key, 0)
            if done_first:
                await at_c._on_handoff_done("b", done, _no_reply)
                await trio.testing.wait_all_tasks_blocked()
                assert c._shard.replica_hosts() == [HOST]  # not c's ring yet
            joined = frozenset(JOINED.members)
            at_c.ring_changed(JOINED, joined, joined)
            copies.ring_changed(JOINED)
            if not done_first:
                await at_c._on_handoff_done("b", done, _no_reply)
            await trio.testing.wait_all_tasks_blocked()
            assert c._shard.replica_hosts() == []
            nursery.cancel_scope.cancel()


async def _no_reply(message: Message) -> None:
    raise AssertionError(f"a DONE is not answered: {message}")
