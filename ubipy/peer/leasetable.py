"""The owner's side of the per-IP leases across peers (``ubipy.peer.ipleases``): one
lease an address, granted or denied, and the queue of the peers denied it. Pure: the
time is passed in, no I/O.

The peers denied an address queue for it at its owner, first come first served, as
the hosts of one peer queue for it (``ubipy.fetch.addresses``): each is told when its
turn should come, and the free address is kept for the first due back about then (a
gap before to :data:`TURN_GRACE` after; one due later is no one's turn till then).
One that comes back late keeps its place: the address is its the next time it asks
while it is free (a peer whose rule holds the address long after a denial, a server's
back-off, was otherwise sent to the back each time, for ever).

Restarts (``ubipy.peer.ipleases`` says why): an ask names its peer's run, and one of a
new run ends the leases the peer's earlier run held (:meth:`LeaseTable.ask`); a
renewal is taken as the lease held, if nobody else holds it (:meth:`LeaseTable.renew`);
and a table made at an owner's start grants nothing new until ``quiet_until``.
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Final

# How long a free address is kept for the peer whose turn it is past its time (its
# ask's way to the owner, its scheduler's wake-up); one not come by then is late.
TURN_GRACE: Final = 0.25
# A queued peer that has not asked for this long past its time leaves the queue.
_GONE_AFTER: Final = 60.0
# Weight of the newest hold in an address's mean hold time (how long a request lasts).
_HOLD_WEIGHT: Final = 0.3
# The owner's table forgets idle addresses once it holds this many (and twice as
# many as after its last sweep): memory follows the addresses in use.
_SWEEP_AT: Final = 1024
# The runs of a peer kept (its latest last): an ask of an earlier one comes from a
# process that has ended (a frame late on its way), and is denied.
_RUNS_KEPT: Final = 4

Holder = tuple[str, int]  # (peer id, lease id): one request of one peer


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
    run: int | None = None  # the holder's run, if it said
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

    def __init__(
        self,
        *,
        ip_delay: float,
        term: float,
        grace: float = TURN_GRACE,
        quiet_until: float = -math.inf,
    ) -> None:
        self.ip_delay = ip_delay
        self.term = term
        self.grace = grace
        # Until then nothing is granted but renewals: leases granted before this
        # owner started (by its previous run, or by the previous owner) may be in use.
        self.quiet_until = quiet_until
        self._addresses: dict[str, _Address] = {}
        self._sweep_at = _SWEEP_AT
        self._runs: dict[str, tuple[int, ...]] = {}  # by peer: its runs seen, latest last
        self._heard: dict[str, float] = {}  # by peer: when its latest run last asked

    def __len__(self) -> int:
        return len(self._addresses)

    def ask(self, address: str, holder: Holder, now: float, run: int | None = None) -> Verdict:
        """Grant ``holder`` the lease of ``address``, or say how long to wait (and
        queue its peer for the address). ``run``: the holder's process, if it says."""
        if not self._note_run(holder[0], run, now):
            return Verdict(False, self.ip_delay)  # no one to answer
        entry = self._entry(address, now)
        if entry.holder == holder:
            return Verdict(True)  # the same request asking again
        peer = holder[0]
        if now < self.quiet_until:
            return self._deny(entry, peer, now, self.quiet_until)
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
        self._grant(entry, holder, run, now)
        return Verdict(True)

    def renew(self, address: str, holder: Holder, now: float, run: int | None = None) -> Verdict:
        """``holder`` says it holds the lease of ``address`` and its request runs (it
        renews it now and then): granted if it holds it still, or if nobody does (this
        owner lost its table at a restart since it granted it, or the lease expired
        here): held from now, until released or its term. Denied, and nothing changes,
        if another holds it: the two requests overlap already."""
        if not self._note_run(holder[0], run, now):
            return Verdict(False, self.ip_delay)
        entry = self._entry(address, now)
        if entry.holder == holder:
            return Verdict(True)
        if entry.holder is not None and now < entry.expires:
            return Verdict(False, self.ip_delay)
        self._grant(entry, holder, run, now)
        return Verdict(True)

    def _entry(self, address: str, now: float) -> _Address:
        entry = self._addresses.get(address)
        if entry is None:
            if len(self._addresses) >= self._sweep_at:
                self._sweep(now)
            entry = self._addresses[address] = _Address(gap=self.ip_delay, last_gap=self.ip_delay)
        return entry

    def _grant(self, entry: _Address, holder: Holder, run: int | None, now: float) -> None:
        entry.waiting.pop(holder[0], None)
        entry.holder, entry.run = holder, run
        entry.granted_at, entry.expires = now, now + self.term

    def _note_run(self, peer: str, run: int | None, now: float) -> bool:
        """Note that ``peer`` runs as ``run`` (None: it does not say). A new run means
        its earlier one has ended (a peer id is one data directory's, one process at a
        time), and with it the requests of the leases that run held: they end, and
        their addresses wait their gap from when the server is likely done with them
        (it knows nothing of the client's end: as long as a request here lasts, or now
        if that is past). False: ``run`` is an earlier run's, which has ended (a frame
        late on its way)."""
        if run is None:
            return True
        runs = self._runs.get(peer, ())
        if run in runs:
            if run == runs[-1]:
                self._heard[peer] = now
            return run == runs[-1]
        # Runs are numbered by their start (IpLeases.run): one under the latest is an
        # earlier process's late frame, never seen here. Taken for the newest, it ended
        # the live run's leases mid-request, was granted an address for its term, and
        # left the live run refused for good (a review). Unless the latest has not
        # asked for a term (a clock stepped back across a restart: that run is over).
        if runs and run < runs[-1] and now - self._heard.get(peer, -math.inf) < self.term:
            return False
        self._runs[peer] = (*runs, run)[-_RUNS_KEPT:]
        self._heard[peer] = now
        for entry in self._addresses.values():
            held = entry.holder
            if held is not None and held[0] == peer and entry.run != run and now < entry.expires:
                entry.holder = None
                ends = max(entry.granted_at + entry.hold, now)
                entry.next_allowed = max(entry.next_allowed, ends + entry.gap)
        return True

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
        self._runs = {p: runs for p, runs in self._runs.items() if p in members}
        self._heard = {p: at for p, at in self._heard.items() if p in members}
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
        to another, or it was never granted here. One that nobody holds, before
        ``quiet_until``, was granted by this owner's previous run, most likely: the
        address waits its delay from ``now`` all the same."""
        entry = self._addresses.get(address)
        if entry is None or entry.holder != holder:
            if now < self.quiet_until and (entry is None or entry.holder is None):
                entry = self._entry(address, now)
                entry.next_allowed = max(entry.next_allowed, now + max(self.ip_delay, wait))
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
