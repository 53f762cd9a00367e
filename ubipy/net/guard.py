"""What a stranger on the peer port may cost: the accounting of accepted connections
and the rate limit on what they make us log. No I/O, no trio: fed events and the
time, it answers what to do (close which connections, log which line).

A connection is *unauthenticated* until its first authentic frame. Such a
connection holds at most a small buffer (the reader's first-frame cap) for at most
a few seconds, and at most ``max_unauthenticated`` of them are kept at once: one
more pushes out the oldest of the address holding the most, so a flood of idle or
dribbling connections cannot starve a peer's members of a slot (a member's first
frame follows its connect within a round trip). Authenticated connections are capped
as a whole; over the cap a new connection is refused at once. An address whose
connections keep failing to authenticate is turned away at accept for a while.
"""

from __future__ import annotations

import ipaddress
import math
from collections import Counter, OrderedDict, deque
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

from ubipy.descriptors import descriptor_share

# A connection must authenticate this soon after it is accepted.
AUTH_PATIENCE: Final = 5.0
# An authenticated connection on which nothing arrives for this long is closed (the
# member that dialled it dials again when it next has something to say).
IDLE_TIMEOUT: Final = 120.0
# A connection whose frames are rejected this many times in a row is cut: a member
# never sends bad frames, and a stranger should not get to make us check many.
MAX_BAD_FRAMES: Final = 4
# A source whose connections end this many times within the window without an
# authentic frame is turned away at accept for the penalty.
STRIKE_LIMIT: Final = 8
STRIKE_WINDOW: Final = 10.0
STRIKE_PENALTY: Final = 30.0
# A source that holds an authenticated connection, or held one this long ago, is
# neither struck nor barred: a member's address, which a stranger may share.
STRIKE_TRUST: Final = 600.0

Conn = TypeVar("Conn")


def default_caps() -> tuple[int, int]:
    """(all accepted connections, unauthenticated ones) for this process's file
    descriptor limit: a quarter of what is left after the reserve, at most 1024."""
    total = descriptor_share(8)
    return total, max(4, min(64, total // 2))


@dataclass(slots=True)
class Accepted(Generic[Conn]):
    """Which accepted connections are held and whether they have authenticated.

    When the unauthenticated ones are at their cap, the one pushed out is the oldest
    of the source holding the most: a flood from one address pushes out its own
    connections, not a member's or ``ubipy status``'s from another."""

    max_total: int
    max_unauthenticated: int
    # Per source, oldest first.
    _unauthenticated: dict[str, OrderedDict[Conn, None]] = field(default_factory=dict)
    _source_of: dict[Conn, str] = field(default_factory=dict)
    _authenticated: set[Conn] = field(default_factory=set)
    refused: int = 0
    evicted: int = 0

    def __post_init__(self) -> None:
        if self.max_unauthenticated < 1 or self.max_total < self.max_unauthenticated:
            raise ValueError("need 1 <= max_unauthenticated <= max_total")

    @property
    def unauthenticated(self) -> int:
        return len(self._source_of)

    @property
    def total(self) -> int:
        return len(self._source_of) + len(self._authenticated)

    def admit(self, conn: Conn, source: str = "") -> tuple[bool, list[Conn]]:
        """A connection was accepted from ``source``: whether to keep it, and which
        older ones to close to make room. Sources count as :func:`source_group` says: a
        flood from a /64's many addresses, each a source of one, pushed out a member's
        connection not yet authenticated as readily as its own (a review)."""
        source = source_group(source)
        if len(self._authenticated) >= self.max_total:
            self.refused += 1
            return False, []
        evict: list[Conn] = []
        while self._source_of and (
            len(self._source_of) >= self.max_unauthenticated or self.total >= self.max_total
        ):
            busiest = max(self._unauthenticated.values(), key=len)
            oldest, _ = busiest.popitem(last=False)
            self._forget(oldest)
            evict.append(oldest)
        self.evicted += len(evict)
        self._unauthenticated.setdefault(source, OrderedDict())[conn] = None
        self._source_of[conn] = source
        return True, evict

    def _forget(self, conn: Conn) -> bool:
        source = self._source_of.pop(conn, None)
        if source is None:
            return False
        conns = self._unauthenticated[source]
        conns.pop(conn, None)
        if not conns:
            del self._unauthenticated[source]
        return True

    def authenticated(self, conn: Conn) -> None:
        # One pushed out meanwhile is being closed: it stays out.
        if self._forget(conn):
            self._authenticated.add(conn)

    def closed(self, conn: Conn) -> None:
        self._forget(conn)
        self._authenticated.discard(conn)


@dataclass(slots=True)
class _Source:
    last: float
    suppressed: Counter[str] = field(default_factory=Counter)


class SourceLog:
    """At most one line a second per source (a remote host; an IPv6 one by its /64,
    which one machine usually holds whole), with what was left out since the last: a
    stranger who sends a million bad frames gets a few lines. Over all sources, at
    most ``burst`` lines at once and ``rate`` a second after: a stranger with many
    addresses gets no more, and the next line says how many were left out."""

    def __init__(
        self,
        interval: float = 1.0,
        max_sources: int = 1024,
        *,
        rate: float = 1.0,
        burst: int = 10,
    ) -> None:
        self._interval = interval
        self._max_sources = max_sources
        self._sources: OrderedDict[str, _Source] = OrderedDict()
        self._rate = rate
        self._burst = burst
        self._tokens = float(burst)
        self._refilled = -math.inf
        self._withheld: Counter[str] = Counter()

    def line(
        self, source: str, reason: str, detail: str, now: float, *, always: bool = False
    ) -> str | None:
        """The line to log for this event, or None to count it quietly. ``always``:
        whatever the source logged last (a rare event, one line a source would hide),
        within the limit over all sources."""
        key = source_group(source)
        entry = self._sources.get(key)
        if entry is not None and now - entry.last < self._interval and not always:
            entry.suppressed[reason] += 1
            return None
        self._tokens = min(self._burst, self._tokens + (now - self._refilled) * self._rate)
        self._refilled = now
        if self._tokens < 1:
            self._withheld[reason] += 1
            return None
        self._tokens -= 1
        text = f"{source}: {reason}" + (f" ({detail})" if detail else "")
        if entry is not None and entry.suppressed:
            text += f"; since the last line: {_counts(entry.suppressed)}"
        if self._withheld:
            text += f"; from sources past the limit on lines: {_counts(self._withheld)}"
            self._withheld.clear()
        self._sources[key] = _Source(now)
        self._sources.move_to_end(key)
        while len(self._sources) > self._max_sources:
            self._sources.popitem(last=False)
        return text


def _counts(counts: Counter[str]) -> str:
    return ", ".join(f"{n} {r}" for r, n in sorted(counts.items()))


def source_group(source: str) -> str:
    """What limits and bars count as one source: an address, except that an IPv6
    address counts by its /64 (a stranger on one machine may use every address of
    it)."""
    try:
        address = ipaddress.ip_address(source)
    except ValueError:
        return source
    if isinstance(address, ipaddress.IPv6Address):
        if address.ipv4_mapped is not None:
            return str(address.ipv4_mapped)
        return str(ipaddress.ip_network(f"{address}/64", strict=False))
    return source


class Throttle:
    """Says whether a recurring event should be logged now, counting the rest (for
    running out of file descriptors: a line a minute with the count)."""

    def __init__(self, interval: float) -> None:
        self._interval = interval
        self._last = float("-inf")
        self.count = 0
        self._since = 0

    def hit(self, now: float) -> int | None:
        """Count one; the number since the last line if a line is due now."""
        self.count += 1
        self._since += 1
        if now - self._last < self._interval:
            return None
        self._last = now
        since, self._since = self._since, 0
        return since


class Strikes:
    """Sources whose connections keep ending before they authenticate are turned
    away at accept for a while: a stranger who reconnects in a loop then costs an
    accept and a close, not a reader and a task.

    A member authenticates at once, but it may share its address with a stranger (a
    cluster on one machine, a NAT, an IPv6 /64). A source that holds an authenticated
    connection, or held one within ``trust`` seconds, is therefore never barred: a
    stranger there costs what any unauthenticated connection costs (a small buffer
    for a few seconds), and the member's next connection is not refused."""

    def __init__(
        self,
        limit: int = STRIKE_LIMIT,
        window: float = STRIKE_WINDOW,
        penalty: float = STRIKE_PENALTY,
        max_sources: int = 4096,
        trust: float = STRIKE_TRUST,
    ) -> None:
        self.limit = limit
        self.window = window
        self.penalty = penalty
        self.trust = trust
        self._max_sources = max_sources
        self._strikes: OrderedDict[str, deque[float]] = OrderedDict()
        self._barred: OrderedDict[str, float] = OrderedDict()
        # Authenticated connections open per source, and until when a source whose
        # last one closed is still trusted.
        self._holding: Counter[str] = Counter()
        self._trusted: OrderedDict[str, float] = OrderedDict()

    def _vouched(self, source: str, now: float) -> bool:
        if source in self._holding:
            return True
        return _stands(self._trusted, source, now)

    def barred(self, source: str, now: float) -> bool:
        source = source_group(source)
        return not self._vouched(source, now) and self._bar_stands(source, now)

    def _bar_stands(self, source: str, now: float) -> bool:
        return _stands(self._barred, source, now)

    def failed(self, source: str, now: float) -> bool:
        """A connection from ``source`` ended without authenticating; True if that
        bars the source now. One accepted before a bar counts for nothing more, and
        a vouched-for source for nothing at all."""
        source = source_group(source)
        if self._vouched(source, now) or self._bar_stands(source, now):
            return False
        times = self._strikes.get(source)
        if times is None:
            times = self._strikes[source] = deque()
        self._strikes.move_to_end(source)
        times.append(now)
        while times[0] <= now - self.window:
            times.popleft()
        while len(self._strikes) > self._max_sources:
            self._strikes.popitem(last=False)
        if len(times) < self.limit:
            return False
        del self._strikes[source]
        _hold(self._barred, source, now + self.penalty, self._max_sources)
        return True

    def authenticated(self, source: str) -> None:
        """A connection from ``source`` authenticated: the source is trusted while
        it is open (call :meth:`closed` when it closes)."""
        source = source_group(source)
        self._strikes.pop(source, None)
        self._barred.pop(source, None)
        self._holding[source] += 1

    def closed(self, source: str, now: float) -> None:
        """An authenticated connection from ``source`` closed."""
        source = source_group(source)
        self._holding[source] -= 1
        if self._holding[source] > 0:
            return
        del self._holding[source]
        _hold(self._trusted, source, now + self.trust, self._max_sources)


def _stands(until: OrderedDict[str, float], source: str, now: float) -> bool:
    """Whether ``source``'s entry (a bar, a trust) is there and not past its time; one
    past it goes."""
    end = until.get(source)
    if end is None:
        return False
    if end <= now:
        del until[source]
        return False
    return True


def _hold(until: OrderedDict[str, float], source: str, end: float, most: int) -> None:
    """``source``'s entry holds until ``end``; the oldest go beyond ``most`` sources."""
    until[source] = end
    until.move_to_end(source)
    while len(until) > most:
        until.popitem(last=False)
