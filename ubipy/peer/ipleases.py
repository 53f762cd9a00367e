"""The per-IP rule across peers: a lease on each address, held by its owner on the ring.

Hosts that share an address land on different peers, and each peer's scheduler keeps
the rule (one request in flight per address, ``--ip-delay`` between two) only for the
hosts it owns. So before each request to a host whose address is known (robots.txt,
pages and sitemaps alike) a peer takes the address's lease from the address's owner:
the ring owner of the address's string, computed from the same ring that places
hosts. The owner grants it when nobody holds it and the address has waited its delay
since the last request ended; otherwise it denies it and says how long to wait. When
the request ends the holder gives the lease back, and the address waits its delay
from then. An owner asked is local when the peer owns the address itself (no frame).

The peers denied an address queue for it at its owner, first come first served, as
the hosts of one peer queue for it (``ubipy.fetch.addresses``): each is told when its
turn should come, and the free address is kept for the first due back about then (a
gap before to :data:`TURN_GRACE` after; one due later is no one's turn till then).
One that comes back late keeps its place: the address is its the next time it asks
while it is free (a peer whose rule holds the address long after a denial, a server's
back-off, was otherwise sent to the back each time, for ever). The owner's own asks
queue with the others'; an ask next while the address waits its delay is answered
when the delay is over, with a grant (:data:`ANSWER_HOLD`). Before, the first to ask
once the address was free had it: the owner, which asks itself with no frame, took
the first 80 requests to an address while three peers were denied 77 times each.

What goes wrong, and what happens then:

- the holder dies or is cut off: once membership drops it from the ring, its
  leases end the majority's fence (``fence(--majority-lease)``, 4.3 s by default)
  later, and it is granted no more. A holder cut off from the majority has paused
  (and dropped its requests) by then, as for the hosts handed over on the same
  fence; one back in the ring before then keeps its leases. Before, they stood
  their whole term (a fetch deadline and a margin: over two minutes). The term
  still ends a lease whose holder the ring keeps;
- a release is lost (a connection that broke with it, an owner busy dialling): the
  owner answers each release (an IP_GRANT that grants nothing, which a peer of an
  older version ignores as the answer to nothing), and the holder sends it again
  until answered or the lease would have expired there anyway; none while the owner
  is out of the ring (gone, or back in a moment). Idempotent, it frees its lease only;
- the owner does not answer within ``patience`` (dead, cut off, or a peer of an
  older version that drops the frame): the request goes ahead under the peer's own
  rule and is counted (``ip_lease_timeouts``), so no crawl stalls on a lost owner.
  A grant that arrives after its asker gave up is kept while the request it was
  asked for runs, and given back when it ends, as any lease (given back at once, it
  let the owner grant the address to another while that request still ran); one
  that arrives after the request ended is given back at once;
- the rings disagree (a member joined or died a moment ago): a peer asked for an
  address it does not own under its own ring, or by a peer out of it, denies it for
  an IP delay, and the asker asks again once the rings agree. Until every peer has
  the new ring, the old and the new owner may each grant one lease: a ring change
  can cost one overlap.

A denied request is not made (the crawler puts its URL back) and its host waits
the denial's wait before it is asked again.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from typing import Final

import trio

from ubipy.config import CrawlConfig
from ubipy.membership import fence
from ubipy.net import Handle, Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.ids import run_ids
from ubipy.peer.router import Router
from ubipy.ring import Placement
from ubipy.wire import MAX_LEASE_WAIT, IpGrant, IpLease, IpRelease, Message

# How long a peer waits for the owner's answer before going ahead on its own.
PATIENCE: Final = 2.0
# Added to the fetch deadline for a lease's term: the holder's deadline started
# before it asked, so its request is over by then, frames in flight included.
TERM_MARGIN: Final = 1.0
# How long a holder waits for the owner to answer its release before sending it
# again; doubled at each try (loopback answers in a millisecond, a lost frame costs
# the address a second).
RELEASE_RESEND: Final = 1.0
# Tries at most (waits of 1, 2, 4, 8 s): an owner of an earlier version answers none,
# and each release went 7 times over its lease's two minutes (a review). An owner that
# answered none of a release's tries is sent each later one once, until it answers.
RELEASE_TRIES: Final = 4
# How long a free address is kept for the peer whose turn it is past its time (its
# ask's way to the owner, its scheduler's wake-up); one not come by then is late.
TURN_GRACE: Final = 0.25
# A queued peer that has not asked for this long past its time leaves the queue.
_GONE_AFTER: Final = 60.0
# How long the owner keeps an ask next for a free address, to grant it once the delay is
# over (denied, its peer's rule holds it back a delay more). Well within the patience.
ANSWER_HOLD: Final = PATIENCE / 2
# Weight of the newest hold in an address's mean hold time (how long a request lasts).
_HOLD_WEIGHT: Final = 0.3
# The owner's table forgets idle addresses once it holds this many (and twice as
# many as after its last sweep): memory follows the addresses in use.
_SWEEP_AT: Final = 1024

Holder = tuple[str, int]  # (peer id, lease id): one request of one peer


async def _not_sent(address: str, message: Message) -> bool:
    return False  # not installed yet


@dataclass(frozen=True, slots=True)
class Verdict:
    """The owner's answer: granted, or not before ``wait`` seconds from now. ``next``:
    nobody holds the address nor waits ahead of the asker, so it is the asker's once
    the wait is over (the owner may keep the ask until then, and grant it)."""

    granted: bool
    wait: float = 0.0
    next: bool = False


@dataclass(slots=True)
class _Address:
    holder: Holder | None = None
    granted_at: float = 0.0
    expires: float = 0.0
    next_allowed: float = -math.inf
    # How long a request to this address has lasted, as a running mean: a denial
    # says "the holder should be done in about this long, then the delay".
    hold: float = 0.0
    # The address's wait after a request: the IP delay, or what the server asked if
    # longer. ``gap`` is the shorter of the last two: a server's pace holds it, a 503's
    # back-off once does not (as a running mean, one 2 s back-off made every peer told
    # to come back a second late for the next few turns; the address idle as long).
    gap: float = 0.0
    last_gap: float = 0.0
    # The peers denied it since they last held it, longest waiting first (one place
    # a peer: few), each with when it should be back: what it was told to wait, or
    # the gap if longer.
    waiting: dict[str, float] = field(default_factory=dict)


class LeaseTable:
    """The owner's leases, one per address: pure, the time passed in."""

    def __init__(self, *, ip_delay: float, term: float, grace: float = TURN_GRACE) -> None:
        self.ip_delay = ip_delay
        self.term = term
        self.grace = grace
        self._addresses: dict[str, _Address] = {}
        self._sweep_at = _SWEEP_AT

    def __len__(self) -> int:
        return len(self._addresses)

    def ask(self, address: str, holder: Holder, now: float) -> Verdict:
        """Grant ``holder`` the lease of ``address``, or say how long to wait (and
        queue its peer for the address)."""
        entry = self._addresses.get(address)
        if entry is None:
            if len(self._addresses) >= self._sweep_at:
                self._sweep(now)
            entry = self._addresses[address] = _Address(gap=self.ip_delay, last_gap=self.ip_delay)
        if entry.holder == holder:
            return Verdict(True)  # the same request asking again
        peer = holder[0]
        if entry.holder is not None:
            if now < entry.expires:
                # Free again once the holder is done, as requests here usually
                # are, and the address's gap after it.
                ends = max(entry.granted_at + entry.hold, now)
                return self._deny(entry, peer, now, ends + entry.gap)
            # Expired: its holder died, or its release was lost. It counts as
            # ended when it expired.
            entry.holder = None
            entry.next_allowed = max(entry.next_allowed, entry.expires + self.ip_delay)
        if now < entry.next_allowed:
            return self._deny(entry, peer, now, entry.next_allowed, exact=True)
        turn = self._turn(entry, now)
        if turn is not None and turn != peer and not self._before(entry, peer, turn):
            return self._deny(entry, peer, now, now)  # kept for another
        entry.waiting.pop(peer, None)
        entry.holder, entry.granted_at, entry.expires = holder, now, now + self.term
        return Verdict(True)

    def _deny(
        self, entry: _Address, peer: str, now: float, free: float, *, exact: bool = False
    ) -> Verdict:
        """Deny ``peer``, the address being free at ``free`` (``exact``: known, nobody
        holds it): it queues, or keeps its place, and is told when its turn should
        come, each peer due back ahead of it taking a request and a gap first.

        As exact as can be: a peer denied is held back by its own rule for the gap
        (it counts a denied request as made), so one told too soon came back the gap
        late, and the address stood idle that long; one told too late, as late. Told
        the end of the turn before theirs, four peers on one address asked it 0.3 to
        0.4 s apart, where one alone asks every 0.25 s (0.2 s of delay, 0.05 s of
        request)."""
        waiting = entry.waiting
        for gone in [p for p, due in waiting.items() if now > due + _GONE_AFTER]:
            del waiting[gone]
        turn, ahead = free, False  # after each peer ahead back by then (:meth:`_expected`)
        for other, due in waiting.items():  # longest waiting first
            if other == peer:
                break
            if now <= due + self.grace and due - entry.gap <= turn:
                turn, ahead = max(turn, due) + entry.hold + entry.gap, True
        wait = max(turn - now, 0.0)
        verdict = Verdict(False, wait, next=exact and not ahead)
        # When it is back: told it is next, when the wait is over (its ask is kept
        # until then); else not before its own rule lets it (it holds the address a
        # gap after a denial).
        waiting[peer] = now + (wait if verdict.next else max(wait, entry.gap))
        return verdict

    def _expected(self, entry: _Address, due: float, now: float) -> bool:
        """Whether a peer told to be back at ``due`` is expected about ``now``: not late
        (each ask sets ``due`` again), and due within a gap, the idle time a denial
        costs (its rule holds it a gap). Kept for one due later, the address stood idle
        till then (18 s after one 60 s request made the mean hold long; a review)."""
        return due - entry.gap <= now <= due + self.grace

    def _turn(self, entry: _Address, now: float) -> str | None:
        """The peer the free address is kept for: the first waiting that is expected
        about now (None: none is, it is anyone's)."""
        for peer, due in entry.waiting.items():
            if self._expected(entry, due, now):
                return peer
        return None

    @staticmethod
    def _before(entry: _Address, peer: str, other: str) -> bool:
        """Whether ``peer`` has waited longer than ``other`` (late, it kept its place)."""
        for waiting in entry.waiting:
            if waiting in (peer, other):
                return waiting == peer
        return False

    def members_changed(self, members: Collection[str], now: float, fence: float) -> None:
        """The ring is ``members`` now: the leases of a holder not among them end
        ``fence`` from now at the latest (by then, cut off rather than dead, it has
        paused and dropped its request); those of a holder back among them before
        that run their term again, as its release will come."""
        for entry in self._addresses.values():
            for gone in [p for p in entry.waiting if p not in members]:
                del entry.waiting[gone]  # its turn would keep the address for nobody
            if entry.holder is None or now >= entry.expires:
                continue  # free, or expired already (freed at the next ask)
            if entry.holder[0] in members:
                entry.expires = entry.granted_at + self.term
            else:
                entry.expires = min(entry.expires, now + fence)

    def release(self, address: str, holder: Holder, now: float, wait: float = 0.0) -> bool:
        """``holder``'s request ended: the address waits its delay from ``now``, or
        ``wait`` if longer (what its server asked, as the holder heard it). False (and
        nothing changes) when ``holder`` does not hold it: its lease expired and went
        to another, or it was never granted here."""
        entry = self._addresses.get(address)
        if entry is None or entry.holder != holder:
            return False
        held_for = now - entry.granted_at
        entry.hold = (
            held_for if entry.hold == 0.0 else entry.hold + _HOLD_WEIGHT * (held_for - entry.hold)
        )
        entry.holder = None
        gap = max(self.ip_delay, wait)
        entry.gap, entry.last_gap = min(gap, entry.last_gap), gap
        entry.next_allowed = now + gap
        return True

    def _sweep(self, now: float) -> None:
        """Forget the addresses nobody holds, that are free again, and that are kept
        for nobody."""
        self._addresses = {
            a: e
            for a, e in self._addresses.items()
            if e.next_allowed > now
            or (e.holder is not None and e.expires > now)
            or self._turn(e, now) is not None
        }
        self._sweep_at = max(_SWEEP_AT, 2 * len(self._addresses))


@dataclass(slots=True)
class LeaseStats:
    """A peer's leases as the asker: granted, denied, and asked of an owner that did
    not answer in time (the request went ahead on the peer's own rule)."""

    granted: int = 0
    denied: int = 0
    timeouts: int = 0


@dataclass(slots=True)
class _Pending:
    owner: str
    address: str
    answered: trio.Event = field(default_factory=trio.Event)
    verdict: Verdict | None = None


@dataclass(frozen=True, slots=True)
class _Held:
    owner: str
    id: int
    address: str
    # When it was asked for: granted later, it expires there a term after this, or later.
    asked_at: float


@dataclass(slots=True)
class _Releasing:
    """A release sent and not yet answered by its owner."""

    owner: str
    until: float  # when the lease expires at the owner anyway: no use sending after
    sent: bool = False  # its first copy went already (on a grant's connection)
    taken: trio.Event = field(default_factory=trio.Event)


class IpLeases:
    """A peer's side of the leases: the owner's table for the addresses it owns, and
    the asker's requests for the others. :meth:`install` puts it in front of every
    request of ``crawler``."""

    def __init__(
        self,
        peer_id: str,
        config: CrawlConfig,
        crawler: Crawler,
        router: Router,
        *,
        patience: float = PATIENCE,
        rng: random.Random | None = None,
    ) -> None:
        politeness = config.politeness
        ip_delay = politeness.delay if politeness.ip_delay is None else politeness.ip_delay
        self.table = LeaseTable(ip_delay=ip_delay, term=config.fetch.fetch_deadline + TERM_MARGIN)
        # As long as the majority waits before taking a lost peer's hosts over.
        self._fence = fence(config.membership.majority_lease)
        self.stats = LeaseStats()
        self._peer_id = peer_id
        self._crawler = crawler
        self._router = router
        self._send: Send = _not_sent
        self._address_of: Callable[[str], str | None] = lambda peer_id: None
        self._start_soon: Callable[..., object] = lambda *args: None
        self._patience = patience
        self._ids = run_ids(rng)
        self._pending: dict[int, _Pending] = {}
        self._held: dict[str, _Held] = {}  # by host
        # By host: the lease a request that went ahead unleased (the owner silent past
        # the patience) asked for, should its grant come while the request runs.
        self._unleased: dict[str, _Held] = {}
        self._releasing: dict[int, _Releasing] = {}  # by lease id
        self._silent: set[str] = set()  # owners that answered no release lately
        # The ring's members as membership last said (None: not said yet), and an event
        # set when it changes: releases to an owner out of it wait for it (:meth:`_back`).
        self._ring: frozenset[str] | None = None
        self._ring_changed = trio.Event()
        # By host: how long the owner of the address its request went to said to wait.
        self._denied: dict[str, tuple[float, str]] = {}

    def install(
        self,
        handle: Handle,
        send: Send,
        address_of: Callable[[str], str | None],
        start_soon: Callable[..., object],
    ) -> None:
        """Ask for a lease after whatever the crawler already asks before a request
        (the replicas' barrier: install this after the replicator), give it back after
        whatever runs when one ends, and take the lease frames from ``handle``; frames
        go out through ``send`` to the address ``address_of`` a peer id, and releases
        in the background (``start_soon``)."""
        self._send, self._address_of, self._start_soon = send, address_of, start_soon
        crawler = self._crawler
        before, ended = crawler.clear_to_fetch, crawler.on_request_end

        async def clear_to_fetch(host: str) -> bool:
            return await before(host) and await self.clear_to_fetch(host)

        def on_request_end(host: str) -> None:
            ended(host)
            self.request_ended(host)

        crawler.clear_to_fetch, crawler.on_request_end = clear_to_fetch, on_request_end
        handle(IpLease, self.on_lease)
        handle(IpGrant, self.on_grant)
        handle(IpRelease, self.on_release)

    # -- the asker ------------------------------------------------------------
    async def clear_to_fetch(self, host: str) -> bool:
        """Whether a request to ``host`` may start: the lease of the address it goes
        to is held (the host's own, or the one of the host its robots.txt was
        redirected to: the scheduler's ``ip``), or none is known, or the address's
        owner did not answer in time."""
        slot = self._crawler.scheduler.slot(host)
        address = None if slot is None else slot.ip
        if address is None:
            return True
        owner = self._router.owner(address)
        lease_id = next(self._ids)
        asked_at = trio.current_time()
        if owner == self._peer_id:
            verdict: Verdict | None = await self._when_next(address, (owner, lease_id))
        else:
            verdict = await self._ask(owner, address, lease_id)
        if verdict is None:
            self.stats.timeouts += 1
            self._unleased[host] = _Held(owner, lease_id, address, asked_at)
            return True
        if verdict.granted:
            self.stats.granted += 1
            self._held[host] = _Held(owner, lease_id, address, asked_at)
            return True
        self.stats.denied += 1
        self._denied[host] = (verdict.wait, address)
        return False

    async def _ask(self, owner: str, address: str, lease_id: int) -> Verdict | None:
        where = self._address_of(owner)
        if where is None:
            return None
        pending = self._pending[lease_id] = _Pending(owner, address)
        try:
            with trio.move_on_after(self._patience):
                if await self._send(where, IpLease(lease_id, address)):
                    await pending.answered.wait()
        finally:
            del self._pending[lease_id]
        return pending.verdict

    def request_ended(self, host: str) -> None:
        """A request to ``host`` ended (or was not made): give its lease back; a
        denied host waits what its owner said before it is asked again."""
        now = trio.current_time()
        scheduler = self._crawler.scheduler
        self._unleased.pop(host, None)  # a grant that comes now is given back at once
        held = self._held.pop(host, None)
        if held is not None:
            # The server's wait as this peer heard it (its pace, a Retry-After), which
            # its scheduler has just put on the address: the owner holds it as long,
            # for the hosts of the address on other peers too. Said only past the IP
            # delay, which the owner keeps anyway.
            server = min(scheduler.address_free_at(held.address) - now, MAX_LEASE_WAIT)
            server = server if server > self.table.ip_delay else 0.0
            if held.owner == self._peer_id:
                self.table.release(held.address, (held.owner, held.id), now, server)
            else:
                release = IpRelease(held.id, held.address, server)
                self._release(held.owner, release, held.asked_at + self.table.term)
        wait, address = self._denied.pop(host, (0.0, ""))
        if wait and scheduler.slot(host) is not None:
            # The scheduler has just set the host's next time to its own delay; this
            # only ever pushes it later (restore_host takes the later of the two).
            scheduler.restore_host(host, not_before=now + wait, pages=0)
            # The wait is the address's: its other hosts would be denied too.
            scheduler.defer_address(address, now + wait)

    def _release(self, owner: str, release: IpRelease, until: float, *, sent: bool = False) -> None:
        """Give ``release`` to ``owner`` in the background, again and again until it
        answers, or until ``until`` (its lease has expired there then); none while it is
        out of the ring (:meth:`_back`). ``sent``: the first copy went already."""
        if release.id not in self._releasing:  # else on its way
            self._releasing[release.id] = _Releasing(owner, until, sent)
            self._start_soon(self._send_release, release)

    async def _send_release(self, release: IpRelease) -> None:
        releasing = self._releasing.get(release.id)
        if releasing is None:
            return
        resend, sent = RELEASE_RESEND, releasing.sent
        owner = releasing.owner
        tries = 1 if owner in self._silent else RELEASE_TRIES
        try:
            with trio.move_on_at(releasing.until):
                for _ in range(tries):
                    if not sent:
                        # A send that fails (no connection) is tried again as one
                        # that is not answered is.
                        await self._send(await self._back(owner), release)
                    sent = False
                    with trio.move_on_after(resend):
                        await releasing.taken.wait()
                    if releasing.taken.is_set():
                        self._silent.discard(owner)
                        return
                    resend *= 2
                else:
                    self._silent.add(owner)
        finally:
            del self._releasing[release.id]

    async def _back(self, owner: str) -> str:
        """The address of ``owner`` once it is in the ring. Out of it, it may be gone (a
        new peer at its address refuses frames named for it) or held dead a moment: its
        ring kept us and the lease, and a release given up cost two minutes (a review)."""
        while (where := self._address_of(owner)) is None or not self._in_ring(owner):
            await self._ring_changed.wait()
        return where

    def _in_ring(self, peer_id: str) -> bool:
        return self._ring is None or peer_id in self._ring

    async def on_grant(self, sender: str, grant: IpGrant, reply: Reply) -> None:
        releasing = self._releasing.get(grant.id)
        if releasing is not None:
            if sender == releasing.owner and not grant.granted:
                releasing.taken.set()  # the owner's answer to the release
            return
        pending = self._pending.get(grant.id)
        if pending is None:
            if grant.granted and self._late(sender, grant):
                return
            if grant.granted:
                # Its asker gave up waiting and its request has ended (or was never
                # made): the lease is given back at once (on the grant's connection;
                # again later if unanswered) rather than held for its whole term.
                release = IpRelease(grant.id, grant.address)
                # Waited for before it is sent: the answer may come at once.
                self._release(sender, release, trio.current_time() + self.table.term, sent=True)
                await reply(release)
            return
        if pending.owner != sender or pending.address != grant.address:
            return  # not the answer to what was asked
        pending.verdict = Verdict(grant.granted, grant.wait)
        pending.answered.set()

    def _late(self, sender: str, grant: IpGrant) -> bool:
        """Whether ``grant`` is for a request that went ahead unleased and still runs:
        the lease is held for it now, and given back when it ends."""
        for host, unleased in self._unleased.items():
            if unleased.id == grant.id:
                if unleased.owner != sender or unleased.address != grant.address:
                    return False
                del self._unleased[host]
                self._held[host] = unleased
                return True
        return False

    # -- the owner ------------------------------------------------------------
    async def on_lease(self, sender: str, lease: IpLease, reply: Reply) -> None:
        table = self.table
        if self._router.owner(lease.address) != self._peer_id or not self._in_ring(sender):
            # Not ours under our ring, or the asker out of it (granted, its lease ran its
            # term: the fence ends those held at the change): ask when the rings agree.
            verdict = Verdict(False, table.ip_delay)
        else:
            verdict = table.ask(lease.address, (sender, lease.id), trio.current_time())
            if self._keeps(verdict):
                # Answered once the address is free, not here: the frames of its
                # connection are read after this returns.
                self._start_soon(self._answer_when_next, sender, lease, reply, verdict)
                return
        await self._answer(lease, reply, verdict)

    async def _answer(self, lease: IpLease, reply: Reply, verdict: Verdict) -> None:
        wait = min(verdict.wait, MAX_LEASE_WAIT)
        await reply(IpGrant(lease.id, lease.address, verdict.granted, wait))

    def _keeps(self, verdict: Verdict) -> bool:
        """Whether an ask so answered is kept until the address is free, and granted."""
        return verdict.next and verdict.wait <= ANSWER_HOLD

    async def _answer_when_next(
        self, sender: str, lease: IpLease, reply: Reply, verdict: Verdict
    ) -> None:
        verdict = await self._when_next(lease.address, (sender, lease.id), verdict)
        await self._answer(lease, reply, verdict)

    async def _when_next(
        self, address: str, holder: Holder, verdict: Verdict | None = None
    ) -> Verdict:
        """The table's answer to ``holder`` (``verdict``, if asked already), asked
        again once the wait is over while it says the address is the holder's then."""
        if verdict is None:
            verdict = self.table.ask(address, holder, trio.current_time())
        deadline = trio.current_time() + ANSWER_HOLD
        while self._keeps(verdict) and trio.current_time() + verdict.wait <= deadline:
            await trio.sleep(verdict.wait)
            if not self._in_ring(holder[0]):  # the ring dropped it meanwhile, as above
                return Verdict(False, self.table.ip_delay)
            verdict = self.table.ask(address, holder, trio.current_time())
        return verdict

    async def on_release(self, sender: str, release: IpRelease, reply: Reply) -> None:
        now = trio.current_time()
        self.table.release(release.address, (sender, release.id), now, release.wait)
        # Taken (or not this one's to take: expired, or never granted here): the holder
        # stops sending it. A grant of nothing, which a peer of an older version
        # ignores as the answer to no request of its own.
        await reply(IpGrant(release.id, release.address, False))

    def ring_changed(self, placement: Placement) -> None:
        """Membership changed the ring: the leases of the peers it dropped (dead, cut
        off, gone) end after the majority's fence (:meth:`LeaseTable.members_changed`)."""
        self._ring = frozenset(placement.members)
        self._ring_changed.set()
        self._ring_changed = trio.Event()
        self.table.members_changed(self._ring, trio.current_time(), self._fence)
