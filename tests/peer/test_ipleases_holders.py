"""An address's lease whose holder is lost: the owner ends the leases of a peer its
ring dropped after the majority's fence (keeping them if it is back before), and a
release is answered by the owner and sent again until it is. The cluster's view of
it (the web server's log) is tests/cluster/test_ip_lease_holders.py."""

from __future__ import annotations

from collections.abc import Callable

import trio
import trio.testing

from tests.peer.test_ipleases import A, FakeCrawler, P, Q, asker, granted, table
from ubipy.peer.ipleases import RELEASE_RESEND, RELEASE_TRIES, IpLeases
from ubipy.ring import Ring
from ubipy.wire import IpGrant, IpLease, IpRelease, Message

FENCE = 4.3


def test_the_leases_of_a_peer_the_ring_dropped_end_after_the_fence() -> None:
    leases = table()  # a 30 s term
    assert leases.ask(A, P, 0.0).granted
    leases.members_changed({"q"}, 1.0, FENCE)  # "p" dead, or cut off
    assert not leases.ask(A, Q, 5.2).granted  # cut off, it may still be asking
    # Ended at 5.3, and the address waits its delay from then.
    assert not leases.ask(A, Q, 5.4).granted
    assert leases.ask(A, Q, 5.5).granted
    # Its release, should it come after all (cut off, then healed), frees nothing.
    assert not leases.release(A, P, 6.0)
    assert not leases.ask(A, ("r", 1), 6.0).granted


def test_a_later_ring_change_does_not_put_the_fence_off() -> None:
    leases = table()
    leases.ask(A, P, 0.0)
    leases.members_changed({"q"}, 1.0, FENCE)
    leases.members_changed({"q", "r"}, 3.0, FENCE)  # another change, "p" still out
    assert leases.ask(A, Q, 5.5).granted


def test_a_holder_back_in_the_ring_before_the_fence_keeps_its_lease() -> None:
    """Back before the fence, it may never have paused: its request may still run,
    and its release will come."""
    leases = table()
    leases.ask(A, P, 0.0)
    leases.members_changed({"q"}, 1.0, FENCE)
    leases.members_changed({"p", "q"}, 2.0, FENCE)
    assert not leases.ask(A, Q, 29.0).granted  # its term again
    assert leases.release(A, P, 29.0)


def test_a_lease_ended_by_the_fence_stays_ended_when_its_holder_is_back() -> None:
    leases = table()
    leases.ask(A, P, 0.0)
    leases.members_changed({"q"}, 1.0, FENCE)
    leases.members_changed({"p", "q"}, 6.0, FENCE)
    assert leases.ask(A, Q, 6.0).granted


async def test_the_owner_ends_the_leases_of_the_peers_its_ring_dropped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    owner, _, wire = asker("p")
    await owner.on_lease("q", IpLease(1, A), wire.reply)
    owner.ring_changed(Ring(["p", "r"]))
    await owner.on_lease("r", IpLease(1, A), wire.reply)
    autojump_clock.jump(FENCE + 0.3)  # the default --majority-lease (3 s)'s fence, the delay
    await owner.on_lease("r", IpLease(2, A), wire.reply)
    answers = [m for _, m in wire.sent]
    assert [a.granted for a in answers if isinstance(a, IpGrant)] == [True, False, True]


async def test_the_owner_answers_every_release() -> None:
    owner, _, wire = asker("p")
    await owner.on_lease("q", IpLease(1, A), wire.reply)
    await owner.on_release("q", IpRelease(1, A), wire.reply)
    await owner.on_release("q", IpRelease(1, A), wire.reply)  # a copy: answered too
    assert wire.sent[1:] == [("reply", IpGrant(1, A, False))] * 2


class Releases:
    """The releases a holder sends, and when; ``answered`` lets the owner answer."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.sent: list[IpRelease] = []
        self._sent = trio.Event()

    async def send(self, where: str, message: Message) -> bool:
        if isinstance(message, IpRelease):
            self.times.append(trio.current_time())
            self.sent.append(message)
            self._sent.set()
            self._sent = trio.Event()
        return True

    async def wait_for(self, n: int) -> None:
        while len(self.times) < n:
            await self._sent.wait()


async def released(
    leases: IpLeases,
    crawler: FakeCrawler,
    releases: Releases,
    then: Callable[[], object] | None = None,
) -> None:
    """h.test's request ends: its lease's release goes to ``releases`` until the holder
    stops sending it (the lease's term at most); ``then``: done once the first went.
    The tasks ``leases`` starts go where they went before, after."""
    start_soon = leases._start_soon
    with trio.fail_after(leases.table.term + 1):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            crawler.on_request_end("h.test")
            if then is not None:
                await releases.wait_for(1)
                then()
    leases._start_soon = start_soon


async def test_a_release_is_sent_again_until_the_owner_answers(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, wire, lease = await granted()
    releases = Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            ended = trio.current_time()
            crawler.on_request_end("h.test")
            await releases.wait_for(3)
            # Unanswered, it goes again a second later, then two.
            gaps = [t - ended for t in releases.times]
            assert gaps == [0.0, RELEASE_RESEND, 3 * RELEASE_RESEND]
            # A denial for another request, or an answer from another peer, is not it.
            await leases.on_grant("r", IpGrant(lease.id, A, False), wire.reply)
            await leases.on_grant("q", IpGrant(lease.id, A, False), wire.reply)
        assert len(releases.times) == 3  # answered: sent no more


async def test_a_release_sent_again_says_what_is_left_of_the_servers_wait(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The server's wait counts from the request's end: each copy said it whole, and
    the owner held the address for every peer as much longer as the copy was late (a
    cluster test's seed: the address asked again 3 s after a lost release, not 2)."""
    leases, crawler, wire, lease = await granted()
    crawler.scheduler.free_at[A] = trio.current_time() + 4.0  # a slow server's pace
    releases = Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            crawler.on_request_end("h.test")
            await releases.wait_for(4)  # at 0, 1, 3 and 7 s
            await leases.on_grant("q", IpGrant(lease.id, A, False), wire.reply)
    # What is left, and none once it is within the IP delay the owner keeps anyway.
    assert [r.wait for r in releases.sent] == [4.0, 3.0, 1.0, 0.0]
    assert {(r.id, r.address) for r in releases.sent} == {(lease.id, A)}


async def test_an_owner_that_answers_no_release_is_sent_a_few_then_one(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """An owner of an older version answers no release: each request's release went
    again and again for its lease's two minutes, some 7 frames and a task each (found
    by a review). Now RELEASE_TRIES of them, then one a release, until it answers."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    asked = trio.current_time()
    assert await crawler.clear_to_fetch("h.test")
    releases = Releases()
    await released(leases, crawler, releases)
    assert trio.current_time() == asked + 15  # waits of 1, 2, 4 and 8 s
    assert [t - asked for t in releases.times] == [0, 1, 3, 7][:RELEASE_TRIES]
    releases.times.clear()
    leases._send = wire.send  # the next lease asked for, and granted
    assert await crawler.clear_to_fetch("h.test")
    await released(leases, crawler, releases)
    assert len(releases.times) == 1


async def test_an_owner_gone_from_membership_is_sent_no_more_copies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, _ = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("h.test")
    releases = Releases()

    def dead() -> None:
        leases._address_of = lambda peer_id: None  # its table went with it

    await released(leases, crawler, releases, then=dead)
    assert len(releases.times) == 1


async def test_a_late_grant_given_back_is_sent_again_until_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Its first copy goes on the grant's connection, as before; the owner's answer
    ends it there."""
    leases, _, wire = asker("q")
    releases = Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            await leases.on_grant("q", IpGrant(7, A, True), wire.reply)
            assert wire.sent == [("reply", IpRelease(7, A))]
            await releases.wait_for(1)
            await leases.on_grant("q", IpGrant(7, A, False), wire.reply)
    assert len(releases.times) == 1


async def test_a_release_is_not_sent_again_to_an_owner_out_of_the_ring(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Dead or gone, its table went with it; a new peer at its address would refuse
    frames named for it, and count them against the sender."""
    leases, crawler, _ = asker("q", IpGrant(0, A, True))
    assert await crawler.clear_to_fetch("h.test")
    releases = Releases()
    await released(leases, crawler, releases, then=lambda: leases.ring_changed(Ring(["p"])))
    assert len(releases.times) == 1  # "q" is out of the ring


async def test_no_release_goes_to_an_owner_out_of_the_ring(
    autojump_clock: trio.testing.MockClock,
) -> None:
    leases, crawler, _ = asker("q", IpGrant(0, A, True))
    leases.ring_changed(Ring(["p", "q"]))
    assert await crawler.clear_to_fetch("h.test")
    leases.ring_changed(Ring(["p"]))
    releases = Releases()
    with trio.fail_after(leases.table.term + 1):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            crawler.on_request_end("h.test")
    assert releases.times == []


async def test_a_release_waits_for_an_owner_briefly_out_of_the_ring(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A false death, a short cut: the holder gave its release up while the owner, its
    own ring keeping the holder (or taking it back before the fence), kept the lease
    its whole term, two minutes, the address with it (found by a review). The copies
    wait for the owner to be back."""
    leases, crawler, wire = asker("q", IpGrant(0, A, True))
    leases.ring_changed(Ring(["p", "q"]))
    assert await crawler.clear_to_fetch("h.test")
    [held] = leases._held.values()
    releases = Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            ended = trio.current_time()
            crawler.on_request_end("h.test")  # and the release is lost on its way
            await releases.wait_for(1)
            leases.ring_changed(Ring(["p"]))  # "q" held dead here a moment
            await trio.sleep_until(ended + 3 * RELEASE_RESEND)  # its copy due at 1 s
            assert len(releases.times) == 1  # none while it is out
            leases.ring_changed(Ring(["p", "q"]))  # back
            await releases.wait_for(2)
            assert releases.times[1] == ended + 3 * RELEASE_RESEND
            await leases.on_grant("q", IpGrant(held.id, A, False), wire.reply)
        assert len(releases.times) == 2  # answered: sent no more
    # The owner's ring the while: "p" dropped, back before the fence, its lease kept.
    owner = table()
    owner.ask(A, P, 0.0)
    owner.members_changed({"q"}, 1.0, FENCE)
    owner.members_changed({"p", "q"}, 2.0, FENCE)
    assert not owner.ask(A, Q, 20.0).granted  # until its release comes
    assert owner.release(A, P, 20.0)


async def test_a_peer_the_ring_dropped_is_granted_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The fence ends the leases held when the ring changes; one granted after it (an
    ask from a peer already dropped, dead or cut off) ran its whole term."""
    owner, _, wire = asker("p")
    owner.ring_changed(Ring(["p", "r"]))
    await owner.on_lease("q", IpLease(1, A), wire.reply)
    autojump_clock.jump(FENCE + 0.3)
    await owner.on_lease("r", IpLease(2, A), wire.reply)
    assert wire.sent == [("reply", IpGrant(1, A, False, 0.2)), ("reply", IpGrant(2, A, True))]


async def test_an_ask_kept_while_the_ring_drops_its_peer_is_denied(
    autojump_clock: trio.testing.MockClock,
) -> None:
    owner, _, wire = asker("p")
    async with trio.open_nursery() as nursery:
        owner._start_soon = nursery.start_soon
        await owner.on_lease("r", IpLease(1, A), wire.reply)
        owner.table.release(A, ("r", 1), trio.current_time())
        await owner.on_lease("q", IpLease(2, A), wire.reply)  # next: kept for the delay
        assert len(wire.sent) == 1
        owner.ring_changed(Ring(["p", "r"]))  # "q" dropped meanwhile
    assert wire.sent[1:] == [("reply", IpGrant(2, A, False, 0.2))]
    assert owner.table.ask(A, ("r", 2), trio.current_time()).granted  # q holds nothing


async def test_a_grant_for_a_lease_being_given_back_is_given_back_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A renewal the owner took after the release granted the lease again: ignored, the
    address stood held at the owner for the lease's term."""
    leases, crawler, wire, lease = await granted()
    releases = Releases()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            leases._start_soon, leases._send = nursery.start_soon, releases.send
            crawler.on_request_end("h.test")
            await releases.wait_for(1)
            await leases.on_grant("q", IpGrant(lease.id, A, True), wire.reply)
            assert wire.sent[-1] == ("reply", releases.sent[0])
            await leases.on_grant("q", IpGrant(lease.id, A, False), wire.reply)
    assert len(releases.times) == 1
