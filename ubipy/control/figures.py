"""The control centre's memory of the cluster's figures: pure, no I/O, no clock of its own.

Each peer's figures (the shape of ``PeerStatus.as_json()``) arrive about once a
second. The book keeps the latest per peer, a short track of (uptime, pages) from
which pages/s is measured, and a bounded chart history sampled on a fixed beat.

Rates are measured on the reporting peer's own uptime, not on arrival times: pushes
jitter on the network and may arrive two at once or not at all in a given second,
while the peer's uptime advances exactly as its pages were fetched.
"""

from __future__ import annotations

import math
from collections import Counter, deque
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from ubipy.rolling import RollingRate
from ubipy.wording import counted

#: Member states as the dashboard names them (MemberState's names, lower case).
STATES: Final = ("alive", "suspect", "dead", "left")
# Alive and suspect peers still own a share of the ring, so their frontier and
# hosts count towards the cluster's; a dead or departed peer's are someone else's now.
LIVE_STATES: Final = frozenset({"alive", "suspect"})
#: The keys of a peer's figures (``PeerStatus.as_json()``) that the book reads.
FIGURE_FIELDS: Final = (
    "version",
    "started_at",
    "uptime",
    "pages",
    "pages_per_second",
    "errors",
    "timeouts",
    "pending",
    "hosts",
    "in_flight",
    "bytes_in",
    "bytes_out_wire",
    "paused",
    "holding",
    "joining",
    "slowest_hosts",
)
# At most this many of a peer's slowest hosts are kept from its figures.
MAX_SLOW_HOSTS: Final = 10

# One of a peer's slowest hosts: (host, seconds to answer (-1: none timed), seconds
# it waits between two requests or until its next, 503/429 answers without Retry-After in
# a row, tries of its robots.txt that failed while its pages wait for it). A tuple, so
# rows stay JSON.
SlowHostRow = tuple[str, float, float, int, int]


@dataclass(frozen=True, slots=True)
class PeerRow:
    """One peer as the dashboard shows it. Numbers are 0 until it has reported."""

    peer_id: str
    address: str
    state: str
    version: str
    reported: bool
    started_at: float | None
    uptime: float
    pages: int
    pages_per_second: float
    errors: int
    timeouts: int
    frontier: int
    hosts: int
    in_flight: int
    bytes_in: int
    bytes_out: int
    # Seconds since its figures last changed; None if it never reported.
    age: float | None
    # What the peer says of itself beyond its state: paused and why, or joining.
    note: str = ""
    # The hosts it goes slowest on, slowest first (see ``slow_hosts``).
    slowest: tuple[SlowHostRow, ...] = ()

    @property
    def live(self) -> bool:
        return self.state in LIVE_STATES

    def slowest_lines(self) -> list[str]:
        """Its slowest hosts in a line for people (see :func:`describe_slow_host`); none
        when it has none."""
        if not self.slowest:
            return []
        return [
            f"{self.peer_id}: slowest hosts: " + "; ".join(map(describe_slow_host, self.slowest))
        ]

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


@dataclass(frozen=True, slots=True)
class Totals:
    peers: int
    by_state: Mapping[str, int]
    pages: int
    pages_per_second: float
    errors: int
    timeouts: int
    frontier: int
    hosts: int
    in_flight: int
    bytes_in: int
    bytes_out: int

    def as_json(self) -> dict[str, Any]:
        out = {name: getattr(self, name) for name in self.__slots__}
        out["by_state"] = dict(self.by_state)
        return out


@dataclass(frozen=True, slots=True)
class ChartPoint:
    """Pages/s per peer and in total at one beat of the sampler."""

    t: float
    total: float
    peers: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class ChartEvent:
    """A change in the cluster the chart marks: a member joined, was suspected,
    declared dead, left, came back (healed), or paused / resumed for lack of a
    majority."""

    t: float
    peer_id: str
    what: str


# Seconds after its first view in which a member first met is not news (see update).
SETTLING: Final = 5.0
# What a member's new state is called on the chart (alive is "joined" or "healed").
_NEWS: Final = {"suspect": "suspected", "dead": "declared dead", "left": "left"}


def _what_changed(before: Mapping[str, Any] | None, after: Mapping[str, Any]) -> list[str]:
    """What a member's entry in two successive cluster views says happened to it. One
    first met dead or gone died or left before this control peer heard of it: no news
    now (QA: a restarted control peer marked "declared dead" 17 s after the death)."""
    state = _text(after.get("state")).lower()
    was = None if before is None else _text(before.get("state")).lower()
    changes = []
    if before is None and state in ("dead", "left"):
        pass
    elif state != was:
        if state == "alive":
            if was != "suspect":  # a refuted suspicion is no news
                changes.append("healed" if was in ("dead", "left") else "joined")
        elif state in _NEWS:
            changes.append(_NEWS[state])
    paused = bool(after.get("paused"))
    if paused != (before is not None and bool(before.get("paused"))):
        changes.append("paused" if paused else "resumed")
    return changes


# A peer's counters (its figures' names): what it did this run, from 0 at each start.
_COUNTERS = ("pages", "errors", "timeouts", "bytes_in", "bytes_out_wire")


@dataclass(slots=True)
class _Track:
    figures: Mapping[str, Any]
    changed_at: float
    started_at: float | None
    pages: RollingRate  # pages against the peer's own uptime


def _number(value: object) -> float:
    # Figures come from other peers: anything not a finite number reads as 0
    # rather than poisoning totals, JSON (NaN is not JSON) or the chart's scale.
    if isinstance(value, bool) or not isinstance(value, int | float):
        return 0.0
    value = float(value)
    return value if math.isfinite(value) else 0.0


def _count(value: object) -> int:
    return max(int(_number(value)), 0)


def _counted(figures: Mapping[str, Any]) -> Counter[str]:
    return Counter({name: _count(figures.get(name)) for name in _COUNTERS})


def _text(value: object, default: str = "") -> str:
    return value if isinstance(value, str) else default


class FiguresBook:
    """The latest figures per peer, their rates, cluster totals and a chart history.

    ``update(view, now)`` takes the backend's cluster view (peer id → member state
    and figures); ``sample(now)`` adds a chart point and is meant to be called on a
    fixed beat. ``now`` is any monotonic clock in seconds, the same for both.
    """

    def __init__(
        self,
        *,
        history: float = 300.0,
        resolution: float = 1.0,
        rate_window: float = 5.0,
        stale_after: float = 5.0,
    ) -> None:
        self.history = history
        self.resolution = resolution
        self.rate_window = rate_window
        self.stale_after = stale_after
        self._members: dict[str, Mapping[str, Any]] = {}
        self._tracks: dict[str, _Track] = {}
        # Counters of the earlier runs of each peer seen here, and of the peers gone from
        # the view: a restart or a member forgotten did not make the cluster's pages go
        # back (QA: the total fell from 1439 to 1331 while the crawl went on).
        self._carried: dict[str, Counter[str]] = {}
        # A member gone from the view: its earlier runs' counters, its last run's, and
        # that run's start and last reading, for when it comes back (a review: counted
        # twice then).
        self._gone: dict[str, tuple[Counter[str], Counter[str], float | None, float, int]] = {}
        self._chart: deque[ChartPoint] = deque()
        self._events: deque[ChartEvent] = deque()
        self._now = 0.0
        self._since: float | None = None  # the first view's time

    # -- input ------------------------------------------------------------------
    def update(self, view: Mapping[str, Mapping[str, Any]], now: float) -> None:
        """Take the cluster view: who is a member, in which state, with which figures."""
        self._now = max(self._now, now)
        before, self._members = self._members, dict(view)
        for peer_id, entry in sorted(view.items()):
            # A report without figures (the member did not answer) says nothing of a pause.
            previous = before.get(peer_id)
            if previous is not None and "uptime" not in entry:
                entry = {**entry, "paused": previous.get("paused")}
                self._members[peer_id] = entry
            # The first views are where the dashboard starts, not news: the members come
            # as gossip tells of them (QA: a restarted control peer marked "joined" a
            # member of 40 s).
            if self._since is None:
                self._since = now
            settled = before and (previous is not None or now - self._since >= SETTLING)
            for what in _what_changed(previous, entry) if settled else ():
                self._events.append(ChartEvent(now, peer_id, what))
        while self._events and self._events[0].t < now - self.history:
            self._events.popleft()
        for peer_id, entry in view.items():
            if "uptime" in entry and "pages" in entry:
                self._record(peer_id, entry, now)
        for gone in self._tracks.keys() - view.keys():
            track = self._tracks.pop(gone)
            uptime, pages = track.pages.last or (0.0, 0)
            carried = self._carried.pop(gone, Counter())
            self._gone[gone] = (carried, _counted(track.figures), track.started_at, uptime, pages)

    def _record(self, peer_id: str, figures: Mapping[str, Any], now: float) -> None:
        uptime = _number(figures.get("uptime"))
        pages = _count(figures.get("pages"))
        started_at = figures.get("started_at")
        started = _number(started_at) if started_at is not None else None
        track = self._tracks.get(peer_id)
        if track is not None:
            last = track.pages.last
            restarted = track.started_at != started or (
                last is not None and (uptime < last[0] or pages < last[1])
            )
            if restarted:
                self._carried.setdefault(peer_id, Counter()).update(_counted(track.figures))
                track = None
            elif last is not None and uptime == last[0]:
                track.figures = figures  # the same report seen again: nothing has moved
                return
        if track is None and (was := self._gone.pop(peer_id, None)) is not None:
            # Back: what it had counted goes on from where its last run stood, or from
            # the end of that run if this is another.
            carried, its_run, started_was, uptime_was, pages_was = was
            if started != started_was or uptime < uptime_was or pages < pages_was:
                carried.update(its_run)
            if carried:
                self._carried[peer_id] = carried
        if track is None:
            track = self._tracks[peer_id] = _Track(
                figures, now, started, RollingRate(self.rate_window)
            )
        track.figures = figures
        track.changed_at = now
        track.pages.add(uptime, pages)

    @property
    def gone(self) -> Counter[str]:
        """The counters of the members gone from the view, over all their runs."""
        total: Counter[str] = Counter()
        for carried, last, *_ in self._gone.values():
            total.update(carried)
            total.update(last)
        return total

    def _counters(self, peer_id: str) -> Counter[str]:
        """The peer's counters over every run seen here."""
        counted = Counter(self._carried.get(peer_id, {}))
        if (track := self._tracks.get(peer_id)) is not None:
            counted.update(_counted(track.figures))
        return counted

    def sample(self, now: float) -> None:
        """Add one chart point (call it every ``resolution`` seconds)."""
        self._now = max(self._now, now)
        rates = {peer_id: self._rate(peer_id, now) for peer_id in sorted(self._tracks)}
        self._chart.append(ChartPoint(now, sum(rates.values()), rates))
        while self._chart and self._chart[0].t < now - self.history:
            self._chart.popleft()

    # -- output -----------------------------------------------------------------
    def _rate(self, peer_id: str, now: float) -> float:
        track = self._tracks.get(peer_id)
        if track is None:
            return 0.0
        member = self._members.get(peer_id, {})
        if _text(member.get("state")).lower() not in LIVE_STATES:
            return 0.0  # a dead peer's last figures are history, not a pace
        if now - track.changed_at > self.stale_after:
            return 0.0  # no news of it: it is not known to be fetching anything
        rate = track.pages.rate()
        if rate is not None:
            return rate
        # One reading only: the peer's own lifetime average is the best guess.
        return _number(track.figures.get("pages_per_second"))

    def rows(self, now: float | None = None) -> list[PeerRow]:
        now = self._now if now is None else now
        return [self._row(peer_id, entry, now) for peer_id, entry in sorted(self._members.items())]

    def _row(self, peer_id: str, entry: Mapping[str, Any], now: float) -> PeerRow:
        track = self._tracks.get(peer_id)
        figures: Mapping[str, Any] = track.figures if track is not None else entry
        if peer_id in self._carried:
            figures = {**figures, **self._counters(peer_id)}
        state = _text(entry.get("state"), "unknown").lower()
        return PeerRow(
            peer_id=peer_id,
            address=_text(entry.get("address")),
            state=state if state in STATES else "unknown",
            version=_text(figures.get("version")),
            reported=track is not None,
            started_at=track.started_at if track is not None else None,
            uptime=_number(figures.get("uptime")),
            pages=_count(figures.get("pages")),
            pages_per_second=self._rate(peer_id, now),
            errors=_count(figures.get("errors")),
            timeouts=_count(figures.get("timeouts")),
            frontier=_count(figures.get("pending")),
            hosts=_count(figures.get("hosts")),
            in_flight=_count(figures.get("in_flight")),
            bytes_in=_count(figures.get("bytes_in")),
            bytes_out=_count(figures.get("bytes_out_wire")),
            age=max(now - track.changed_at, 0.0) if track is not None else None,
            note=_note(figures),
            slowest=slow_hosts(figures.get("slowest_hosts")),
        )

    def chart(self) -> list[ChartPoint]:
        return list(self._chart)

    def events(self) -> list[ChartEvent]:
        return list(self._events)


def _note(figures: Mapping[str, Any]) -> str:
    paused = figures.get("paused")
    if isinstance(paused, str) and paused:
        return f"paused: {paused}"[:200]
    joining = _count(figures.get("joining"))
    if joining:
        return f"joining (attempt {joining})"
    holding = figures.get("holding")
    return f"holding: {holding}"[:200] if isinstance(holding, str) and holding else ""


def slow_hosts(value: object) -> tuple[SlowHostRow, ...]:
    """A peer's ``slowest_hosts`` figure ("host latency delay strikes robots; ...", the
    last left out by earlier versions), read; what does not read (another version's
    peer, a bad one) is left out, never fatal."""
    rows: list[SlowHostRow] = []
    for entry in _text(value).split(";")[:MAX_SLOW_HOSTS]:
        parts = entry.split()
        if len(parts) not in (4, 5) or len(parts[0]) > 255:
            continue
        try:
            latency, delay = float(parts[1]), float(parts[2])
            strikes, tries = int(parts[3]), int(parts[4]) if len(parts) == 5 else 0
        except ValueError:
            continue
        if math.isfinite(latency) and math.isfinite(delay):
            rows.append((parts[0], max(latency, -1.0), delay, max(strikes, 0), max(tries, 0)))
    return tuple(rows)


def describe_slow_host(row: SlowHostRow) -> str:
    """``"a.example answers in 1.20 s, waits 1.20 s (3 × 503/429)"``, or ``"b.example
    waits 30.00 s for its robots.txt (1 try failed)"`` (no time to answer measured: a
    refused connection, or a 500, which is not timed), for people."""
    host, latency, delay, strikes, tries = row
    answers = f" answers in {_seconds(latency)}," if latency >= 0 else ""
    text = f"{host}{answers} waits {_seconds(delay)}" + (" for its robots.txt" * bool(tries))
    notes = [f"{counted(tries, 'try', 'tries')} failed"] if tries else []
    notes += [f"{strikes} × 503/429"] if strikes else []
    return text + (f" ({'; '.join(notes)})" if notes else "")


def _seconds(value: float) -> str:
    if value >= 120:  # a Retry-After's hold: "594.00 s" read as a number to work out
        return f"{value / 60:.1f} min"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def totals(rows: Iterable[PeerRow], gone: Mapping[str, int] | None = None) -> Totals:
    """Counters summed over every peer that reported (and ``gone``, those of peers no
    longer in the view); gauges over live peers only."""
    rows = list(rows)
    gone = gone or {}
    live = [r for r in rows if r.live]
    by_state = dict.fromkeys(STATES, 0)
    for r in rows:
        by_state[r.state] = by_state.get(r.state, 0) + 1
    return Totals(
        peers=len(rows),
        by_state=by_state,
        pages=sum(r.pages for r in rows) + gone.get("pages", 0),
        pages_per_second=sum(r.pages_per_second for r in rows),
        errors=sum(r.errors for r in rows) + gone.get("errors", 0),
        timeouts=sum(r.timeouts for r in rows) + gone.get("timeouts", 0),
        frontier=sum(r.frontier for r in live),
        hosts=sum(r.hosts for r in live),
        in_flight=sum(r.in_flight for r in live),
        bytes_in=sum(r.bytes_in for r in rows) + gone.get("bytes_in", 0),
        bytes_out=sum(r.bytes_out for r in rows) + gone.get("bytes_out_wire", 0),
    )


def snapshot(book: FiguresBook, now: float, wall: float) -> dict[str, Any]:
    """The JSON of ``GET /api/status``: rows, totals and the chart, times relative to now."""
    rows = book.rows(now)
    points = book.chart()
    peer_ids = sorted({p for point in points for p in point.peers})
    return {
        "now": wall,
        "peers": [r.as_json() for r in rows],
        "totals": totals(rows, book.gone).as_json(),
        "chart": {
            "history": book.history,
            "resolution": book.resolution,
            # Seconds before now; the browser's clock need not agree with ours.
            "t": [round(p.t - now, 3) for p in points],
            "total": [round(p.total, 3) for p in points],
            # None where the peer was not in the book at that beat: a gap, not a zero.
            "peers": {
                peer_id: [
                    round(p.peers[peer_id], 3) if peer_id in p.peers else None for p in points
                ]
                for peer_id in peer_ids
            },
            "events": [
                {"t": round(e.t - now, 3), "peer": e.peer_id, "what": e.what} for e in book.events()
            ],
        },
    }
