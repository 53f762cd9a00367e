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

The peers denied an address queue for it at its owner, first come first served
(:class:`LeaseTable`, in ``ubipy.peer.leasetable``). The owner's own asks queue with
the others'; an ask next while the address waits its delay is answered when the delay
is over, with a grant (:data:`ANSWER_HOLD`). Before, the first to ask
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
- the owner does not answer within ``patience``, asked twice (dead, cut off, or a
  peer of an older version that drops the frame): the request goes ahead under the
  peer's own rule and is counted (``ip_lease_timeouts``), so no crawl stalls on a
  lost owner. A first ask that cannot be sent (the owner killed that instant, the
  connection refused) waits the patience out as well before the second: going ahead at
  once overlapped the request that held the address's lease (a second refused goes
  ahead at once).
  A grant that arrives after its asker gave up is kept while the request it was
  asked for runs, and given back when it ends, as any lease (given back at once, it
  let the owner grant the address to another while that request still ran); one
  that arrives after the request ended is given back at once;
- the holder is restarted at once (a crash loop, a service manager's quick restart),
  too soon for membership to notice: the ring keeps it, and so did the owner its
  lease, for the lease's term (121 s, every peer denied the address meanwhile, the
  restarted one too). So each ask names the asker's run, when it started (in
  microseconds): an ask of a later run ends the leases the peer's earlier run held, at
  once, and a late frame of an earlier run is refused and ends nothing, seen here
  before or not (a peer id is one data directory's, so its earlier process
  has ended, and its requests with it); the address waits its gap from when the old
  request should have ended at the server (which knows nothing of the client's end).
  A peer of an earlier version says no run, and its leases end as before;
- the owner is restarted at once: its table, in memory only, is empty, and it would
  grant an address whose lease from its previous run is still in use. So a starting
  owner grants nothing for :data:`START_GRACE` (it denies until then, queueing the
  askers as usual), as an NFSv4 server does after a restart; and a holder renews each
  lease it holds every :data:`RENEW_EVERY` while its request runs (IP_LEASE again, with
  ``held``), which an owner that lost its table takes as the lease held (if nobody
  else holds it), until released or its term. The grace is twice the patience:
  several renewals of every lease in use reach the owner within it, and a request
  that went ahead unleased (asked of the owner as it died, no answer within the
  patience) renews its lease as well. Renewing only once the holder sees the owner's
  new run would not do: a holder asks nothing while its request runs. A release the
  owner does not know that comes within the grace is taken as the end of such a
  request: the address waits its delay from then. A starting owner cannot tell a
  restart from a first start (nor from a join that hands it addresses whose previous
  owner granted leases still in use), so every start has its grace: four seconds
  without its addresses; but a peer alone in the base it starts with (the first of a
  cluster, one alone when it stopped), whose leases no other peer held. A holder of
  an earlier version renews nothing: its requests longer than the grace may overlap
  one granted after it, as before;
- the rings disagree (a member joined or died a moment ago): a peer asked for an
  address it does not own under its own ring, or by a peer out of it, denies it for
  an IP delay, and the asker asks again once the rings agree. Until every peer has
  the new ring, the old and the new owner may each grant one lease: a ring change
  can cost one overlap.

A denied request is not made (the crawler puts its URL back) and its host waits
the denial's wait before it is asked again.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Final

import trio

from ubipy.config import CrawlConfig
from ubipy.membership import Quorum, fence
from ubipy.net import Handle, Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.ids import run_ids
from ubipy.peer.leasetable import Holder, LeaseTable, Verdict
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
# How long the owner keeps an ask next for a free address, to grant it once the delay is
# over (denied, its peer's rule holds it back a delay more). Well within the patience.
ANSWER_HOLD: Final = PATIENCE / 2
# How often a holder renews a lease while its request runs (most requests end first:
# no frame), and how long a starting owner grants nothing but renewals: the first
# renewal of each lease in use comes within a second, and a second and third if a
# copy is lost or the owner's new address is not known yet.
RENEW_EVERY: Final = PATIENCE / 2
START_GRACE: Final = 2 * PATIENCE


def start_grace(quorum: Quorum) -> float:
    """The grace of a start: none for a peer alone in the base it starts with (the
    first of a cluster, or one alone when it stopped), whose leases nobody else held
    (every start waited 4 s before its first request: QA). One that left a cluster
    and starts alone (without --join) granted leases others may still hold (a
    review)."""
    alone = quorum.base == {quorum.self_id} and not (quorum.pending or quorum.restoring)
    return 0.0 if alone and not quorum.left_last_run else START_GRACE


async def _not_sent(address: str, message: Message) -> bool:
    return False  # not installed yet


@dataclass(slots=True)
class LeaseStats:
    """A peer's leases as the asker: granted, denied, asked of an owner that did not
    answer in time (the request went ahead on the peer's own rule), and renewals of a
    lease held that its owner denied (another held the address meanwhile)."""

    granted: int = 0
    denied: int = 0
    timeouts: int = 0
    renewals_denied: int = 0


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
    at: float  # when the request ended: the release's wait counts from then
    sent: bool = False  # its first copy went already (on a grant's connection)
    taken: trio.Event = field(default_factory=trio.Event)


_last_run = 0


def _next_run() -> int:
    """A run: the time it started in microseconds, later than any made before in this
    process (peers of one test share it)."""
    global _last_run
    _last_run = max(time.time_ns() // 1000, _last_run + 1)
    return _last_run


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
        grace: float = START_GRACE,
        rng: random.Random | None = None,
    ) -> None:
        """``grace``: how long from now this peer, as an owner, grants nothing new."""
        politeness = config.politeness
        ip_delay = politeness.delay if politeness.ip_delay is None else politeness.ip_delay
        self.table = LeaseTable(
            ip_delay=ip_delay,
            term=config.fetch.fetch_deadline + TERM_MARGIN,
            quiet_until=trio.current_time() + grace,
        )
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
        # This process's run, sent with its asks: when it started, in microseconds, so
        # an owner tells a later run from a late frame of an earlier one (leasetable).
        self.run = _next_run()
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
                # Asked once more: an owner restarted at once (too soon for the ring to
                # notice) lost the first ask with its old process, and going ahead
                # overlapped a request under that process's lease; its new run answers
                # (in its grace, denying). Or the address's new owner, the ring having
                # dropped the silent one meanwhile, under a new id: a late grant of the
                # first then answers nothing pending, and is given back.
                if (again := self._router.owner(address)) != owner:
                    owner, lease_id = again, next(self._ids)
                if owner == self._peer_id:
                    verdict = await self._when_next(address, (owner, lease_id))
                else:
                    verdict = await self._ask(owner, address, lease_id, first=False)
        if verdict is None:
            self.stats.timeouts += 1
            held = self._unleased[host] = _Held(owner, lease_id, address, asked_at)
            self._start_soon(self._renew, host, held)
            return True
        if verdict.granted:
            self.stats.granted += 1
            held = self._held[host] = _Held(owner, lease_id, address, asked_at)
            if owner != self._peer_id:
                self._start_soon(self._renew, host, held)
            return True
        self.stats.denied += 1
        self._denied[host] = (verdict.wait, address)
        return False

    async def _ask(
        self, owner: str, address: str, lease_id: int, *, first: bool = True
    ) -> Verdict | None:
        where = self._address_of(owner)
        if where is None:
            return None
        pending = self._pending[lease_id] = _Pending(owner, address)
        try:
            with trio.move_on_after(self._patience):
                # Not sent (said so): waited out all the same before asking again.
                if await self._send(where, IpLease(lease_id, address, self.run)) or first:
                    await pending.answered.wait()
        finally:
            del self._pending[lease_id]
        return pending.verdict

    async def _renew(self, host: str, held: _Held) -> None:
        """Renew ``held`` with its owner every :data:`RENEW_EVERY` while its request
        runs, held or gone ahead unleased (an owner restarted since lost its table),
        until its term would have ended it there anyway. The answers change nothing
        here (:meth:`_renewed`), but that a grant for a request gone ahead unleased is
        the lease held, given back when it ends (:meth:`_late`)."""
        with trio.move_on_at(held.asked_at + self.table.term):
            while True:
                await trio.sleep(RENEW_EVERY)
                if self._held.get(host) is not held and self._unleased.get(host) is not held:
                    return
                where = self._address_of(held.owner)
                if where is not None and self._in_ring(held.owner):
                    renewal = IpLease(held.id, held.address, self.run, held=True)
                    await self._send(where, renewal)

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
            now = trio.current_time()
            self._releasing[release.id] = _Releasing(owner, until, now, sent)
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
                        where = await self._back(owner)
                        await self._send(where, self._left(release, releasing.at))
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

    def _left(self, release: IpRelease, at: float) -> IpRelease:
        """``release`` as sent now: the server's wait it says is what is left of it (a
        copy a second later said it whole, and the owner held the address a second
        longer for every peer: a cluster test's seed)."""
        wait = release.wait - (trio.current_time() - at)
        return replace(release, wait=wait if wait > self.table.ip_delay else 0.0)

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
            elif sender == releasing.owner:
                # The lease granted again (a renewal the owner took after the release):
                # given back at once, or the address stood held for the lease's term
                # (a review's suspicion).
                await reply(self._left(IpRelease(grant.id, grant.address), releasing.at))
            return
        pending = self._pending.get(grant.id)
        if pending is None:
            if self._renewed(sender, grant):
                # Denied: another holds the address while this request runs (the owner
                # restarted and no renewal reached it in its grace): an overlap, said.
                self.stats.renewals_denied += not grant.granted
                return
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

    def _renewed(self, sender: str, grant: IpGrant) -> bool:
        """Whether ``grant`` answers a renewal of a lease held: granted, nothing to do;
        denied (another holds the address: its owner restarted, and our renewals did
        not reach it within its grace), nothing to do either, the request being made."""
        return any(
            (held.id, held.owner, held.address) == (grant.id, sender, grant.address)
            for held in self._held.values()
        )

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
        elif lease.held:
            verdict = table.renew(lease.address, (sender, lease.id), trio.current_time(), lease.run)
        else:
            now = trio.current_time()
            verdict = table.ask(lease.address, (sender, lease.id), now, lease.run)
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
        verdict = await self._when_next(lease.address, (sender, lease.id), verdict, lease.run)
        await self._answer(lease, reply, verdict)

    async def _when_next(
        self,
        address: str,
        holder: Holder,
        verdict: Verdict | None = None,
        run: int | None = None,
    ) -> Verdict:
        """The table's answer to ``holder`` (``verdict``, if asked already), asked
        again once the wait is over while it says the address is the holder's then.
        ``run``: the holder's, if it said."""
        if verdict is None:
            verdict = self.table.ask(address, holder, trio.current_time(), run)
        deadline = trio.current_time() + ANSWER_HOLD
        while self._keeps(verdict) and trio.current_time() + verdict.wait <= deadline:
            await trio.sleep(verdict.wait)
            if not self._in_ring(holder[0]):  # the ring dropped it meanwhile, as above
                return Verdict(False, self.table.ip_delay)
            verdict = self.table.ask(address, holder, trio.current_time(), run)
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
