"""A peer's leave on a stop: announce it, then hand everything to the peers that stay.

When the whole cluster stops at once, the others refuse hand-offs as they leave too,
and the leaving peer keeps what it holds (its shard has it all; a restart brings it
back) rather than wait out the patience; so too past a frozen one (SIGSTOP: QA).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping

import trio

from ubipy.errors import StorageError
from ubipy.membership import Leave, Member, Membership, MemberState, Outgoing
from ubipy.peer.crawler import Crawler
from ubipy.peer.forwarding import Forwarder
from ubipy.peer.handoff import Handoff
from ubipy.peer.lease import Lease
from ubipy.peer.router import Router
from ubipy.ring import Ring

__all__ = ["leave"]

log = logging.getLogger(__name__)

# A leaving peer hands off this long at most (the rest stays, and moves once it is back).
_LEAVE_PATIENCE = 60.0
_LEAVE_SWEEPS = 5
# Forwarded URLs not yet acknowledged stay in the outbox on disk; a leaving peer
# waits this long for the owners to take them before leaving them there.
_LEAVE_DRAIN = 5.0
_LEAVE_ANNOUNCE = 2.0
# A leave none of those that need it took is sent to them again this often.
_LEAVE_RETRY = 2.0
# Sends a membership frame; False if it could not be.
SendOne = Callable[[Outgoing], Awaitable[bool]]


def _stopping_together(membership: Membership, base: frozenset[str]) -> bool:
    """Whether another member of the base this peer had when asked to stop has left
    too: a cluster stopped as a whole, whose members not told (frozen, cut off) learn
    it when the others are back (their answers say they left). Waited for, one frozen
    member held every other's stop a minute (tests/cluster/test_stop_frozen.py)."""
    return any(
        m.state is MemberState.LEFT
        for m in membership.members()
        if m.id in base and m.id != membership.self_id
    )


async def _announce(membership: Membership, send_one: SendOne, lease: Lease) -> None:
    """Tell every member this peer leaves. Those of the base that hold no lease without
    it drop it on that word alone (Quorum.needed): each is told until it answers an ask
    sent after the leave (a frame handed to a relay, or written on a connection a
    silent cut swallows, went no further), every _LEAVE_RETRY s, _LEAVE_PATIENCE at
    most. Stopped during a cut, the peer with the smallest id of two exited at once,
    and the other, the cut healed, never fetched again (a review's fuzzer)."""
    with trio.move_on_after(_LEAVE_ANNOUNCE):
        async with trio.open_nursery() as announcing:
            for out in membership.leave(trio.current_time()):
                announcing.start_soon(send_one, out)
    needed = lease.quorum.needed(trio.current_time())
    me = membership.member(membership.self_id)
    if not needed or me is None or _stopping_together(membership, lease.left_with):
        return
    word, told = Leave(me.id, me.address, me.incarnation), set[str]()

    def untold() -> list[Member]:
        """Those still to tell: not those that left too (a whole cluster stopping)."""
        found = (membership.member(m) for m in sorted(needed - told))
        return [m for m in found if m is not None and m.state is not MemberState.LEFT]

    async def tell(member: Member) -> None:
        out = Outgoing(member.address, word, to=member.id)
        if await send_one(out) and await lease.heard_after(member.id, member.address, _LEAVE_RETRY):
            told.add(member.id)

    async def tell_needed() -> None:
        # A dial across a cut, or a relay, may take long to say no: a try is bounded.
        with trio.move_on_after(_LEAVE_ANNOUNCE + _LEAVE_RETRY):
            async with trio.open_nursery() as telling:
                for member in untold():
                    telling.start_soon(tell, member)

    await tell_needed()
    if told or not untold():
        return
    log.warning(
        "leaving: none of the peers that need this one for a majority could be told it "
        "leaves (%s); trying again for %g s (a second stop signal ends it now): "
        "untold, they fetch nothing until it is started again",
        ", ".join(sorted(needed)), _LEAVE_PATIENCE,
    )  # fmt: skip
    with trio.move_on_after(_LEAVE_PATIENCE):
        while not told and untold():
            await tell_needed()
            if not told:
                await trio.sleep(_LEAVE_RETRY / 2)
    if told:
        log.info("leaving: %s told", ", ".join(sorted(told)))
    elif not untold():
        log.info("leaving: %s left too", ", ".join(sorted(needed)))
    else:
        log.warning(
            "leaving: %s not told: they fetch nothing until this peer is started again",
            ", ".join(sorted(needed)),
        )


async def leave(
    membership: Membership,
    send_one: SendOne,
    lease: Lease,
    router: Router,
    reachable_others: Callable[[], frozenset[str]],
    crawler: Crawler,
    handoff: Handoff,
    heard_at: Mapping[str, float],
    forwarder: Forwarder,
) -> None:
    """Announce the leave (``membership``'s frames through ``send_one``), then hand the
    hosts to the ``reachable_others()`` and let the outbox drain to them."""
    # The base before the leave, so that a newcomer counted here is not left waiting
    # for an answer from a peer gone; then the leave, sent first and waited for: a peer
    # that finds nobody to hand to exits at once, and a leave still being sent then was
    # lost (the others waited for its death).
    await lease.parting(_LEAVE_ANNOUNCE / 2)
    await _announce(membership, send_one, lease)
    lease.left()  # now: one stopped alone may exit before its leave's event is handled
    left_at, silent = trio.current_time(), set[str]()
    with trio.move_on_after(_LEAVE_PATIENCE):
        for _ in range(_LEAVE_SWEEPS):
            if not (others := reachable_others() - silent):
                break
            ring = Ring(others)
            crawler.ring_changed(ring)
            handoff.ring_changed(ring, frozenset(others), frozenset(), sweep=False)
            try:
                if await handoff.sweep():
                    break
            except StorageError as exc:  # a host handed could not be dropped here
                log.warning("leaving: hand-offs wait for the shard: %s", exc)
            silent |= {m for m in handoff.unanswered if heard_at.get(m, 0) < left_at}
            await trio.sleep(1.0)  # an owner did not answer: try again shortly
    with trio.move_on_after(_LEAVE_DRAIN):
        while router.backlog() and reachable_others() - silent:
            with trio.move_on_after(1.0):
                await forwarder.drained.wait()
    if not reachable_others() - silent:
        log.info("no peer left to hand over to: everything stays in the shard")
    if router.backlog():
        log.info("%d forwarded URLs not acknowledged: kept in the outbox", router.backlog())
