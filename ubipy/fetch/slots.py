"""What the politeness scheduler works on: a frontier entry as it sees it, the jobs it
hands out, and the per-host and per-address slots it keeps (the scheduler's logic is
:mod:`ubipy.fetch.politeness`)."""

from __future__ import annotations

import enum
import heapq
import math
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from ubipy.fetch.robots import RobotsFetch, RobotsRules
from ubipy.fetch.sitemaps import is_sitemap
from ubipy.fetch.throttle import Pace


class Entry(NamedTuple):
    """A frontier entry as the scheduler sees it. A named tuple, not a frozen dataclass:
    one is made for every URL admitted and every one loaded into a window, and a frozen
    dataclass's ``__init__`` sets each field through ``object.__setattr__``, three times
    slower. With this and :class:`ubipy.store.FrontierRow` as named tuples, admitting a
    new link takes 13% fewer instructions (callgrind, bench/admission.py)."""

    fp: int
    seq: int
    url: str
    depth: int
    # Requests already made for this entry that failed in a retryable way.
    attempt: int = 0
    # Its priority under a ranked crawl order (ranking.py); 0 under the others.
    score: float = 0.0
    # A page fetched before, asked again (--recrawl), not a URL from the frontier.
    refresh: bool = False
    # Of ``attempt``, those that spent none of its retries (ubipy.fetch.retry).
    free: int = 0

    @property
    def fresh(self) -> bool:
        """A new URL's first request: one of its host's page budget. A sitemap is no
        page: it spends none (QA: a host's sitemap took a page, and the budget's end
        closed what the sitemap listed)."""
        return self.attempt == 0 and not self.refresh and not is_sitemap(self.depth)

    @property
    def retries(self) -> int:
        """Of ``attempt``, those that spent one of its retries (--retries)."""
        return self.attempt - self.free


#: A page due again in its host's heap: its due time, a tie-breaker, then its entry's
#: fields. A plain tuple of numbers and strings, which CPython's cyclic garbage collector
#: stops tracking (an Entry is a tuple of its own type, tracked for good): at a million
#: pages due again, (due, tie, Entry) was two million of the objects every full
#: collection went through (bench/refresh_memory.py).
DueItem = tuple[float, int, int, int, str, int, int, float, bool]


def due_item(at: float, tie: int, entry: Entry) -> DueItem:
    """A refresh's entry in its host's heap (none has free tries: a refresh spends)."""
    return (at, tie, entry.fp, entry.seq, entry.url, entry.depth, entry.attempt,
            entry.score, entry.refresh)  # fmt: skip


def due_entry(item: DueItem) -> Entry:
    return Entry(*item[2:])


class JobKind(enum.Enum):
    # Not a request to the host: look its name up (the crawler's DNS stage).
    RESOLVE = "resolve"
    ROBOTS = "robots"
    PAGE = "page"
    # A page entry at a sitemap's depth (see ubipy.fetch.sitemaps): a request like a
    # page's, in the same slot (delay, robots.txt, budget, retries), read as a sitemap.
    SITEMAP = "sitemap"
    # Not a request: the entry is closed at once (robots.txt, the host's budget).
    SKIP = "skip"


@dataclass(frozen=True, slots=True)
class Job:
    kind: JobKind
    host: str
    url: str
    entry: Entry | None = None
    reason: str = ""


class HostRobots(enum.Enum):
    UNKNOWN = "unknown"
    KNOWN = "known"
    GIVEN_UP = "given-up"


@dataclass(frozen=True, slots=True)
class SpareRobots:
    """A host's rules for its other scheme (see :mod:`ubipy.fetch.robotsrule`): when
    they were taken, and when they are to be asked again."""

    scheme: str
    rules: RobotsRules
    at: float
    due: float


def scheme_of(url: str) -> str:
    """A URL's scheme as a slot names it: "https:"."""
    return url[: url.index(":") + 1]


def scheme_bit(url: str) -> int:
    """A URL's (or a scheme's) bit in HostSlot.disk_schemes: http 1, https 2."""
    return 2 if url.startswith("https:") else 1


@dataclass(slots=True)
class SchemeBackoff:
    """One scheme of a host backed off while its other goes on (windows.py): no
    connection could be made to it (a port shut, TLS spoken to a plain-HTTP port), so
    its URLs wait until ``until`` aside, the failed tries of its robots.txt counted
    on (the slot is on the other scheme meanwhile). With ``until`` -inf and no URLs, it
    only keeps a scheme's failed tries while the slot asks the other's robots.txt."""

    scheme: str
    until: float
    robots_attempts: int = 0
    entries: list[Entry] = field(default_factory=list)
    # More of its URLs than may be set aside wait: the host waits for ``until``.
    full: bool = False


Loader = Callable[[str, int, int], list[Entry]]
# What a host's new slot owes, if anything: (no request before, its pages spent).
Recall = Callable[[str], tuple[float, int, int] | None]


@dataclass(slots=True)
class HostSlot:
    host: str
    delay: float
    queue: deque[Entry] = field(default_factory=deque)
    on_disk: int = 0
    # The schemes of the entries this run put on disk, past the window (scheme_bit);
    # 0 once the disk holds none. Those restored at a start are not known.
    disk_schemes: int = 0
    last_seq: int = 0
    in_flight: bool = False
    next_allowed: float = 0.0
    armed: bool = False
    # The time it was last put in the scheduler's heap at, and that entry's
    # tie-breaker: an entry with another is stale (the host was put back since).
    armed_at: float = 0.0
    armed_tie: int = -1
    robots_state: HostRobots = HostRobots.UNKNOWN
    robots: RobotsRules | None = None
    robots_fetch: RobotsFetch | None = None
    robots_attempts: int = 0
    # When its rules were last taken (the scheduler's clock), and from when its next
    # request asks robots.txt again first: their age past the TTL, or a failed
    # refetch's back-off (the old rules stand meanwhile).
    robots_at: float = -math.inf
    robots_due: float = math.inf
    # The scheme those rules (or the robots.txt being asked) are for, and the rules of
    # the host's other scheme, if it has had URLs of both.
    robots_scheme: str = ""
    spare_robots: SpareRobots | None = None
    # Page requests made (robots.txt and retries not counted): the host's budget.
    pages: int = 0
    # What its server asked for, apart from --delay: its Crawl-delay (the longer of
    # its schemes', capped), and until when a Retry-After or a back-off holds it. A
    # mark keeps these, the next run or owner adding its own --delay (hostmoves.py).
    crawl_delay: float = 0.0
    asked_until: float = -math.inf
    # The address requests go to, the per-IP rule's key (None: not looked up, or
    # no DNS stage for this host), until when that answer holds, lookups failed in
    # a row.
    address: str | None = None
    resolved_until: float = -math.inf
    lookup_failures: int = 0
    # The address whose queue it waits in, or whose turn it has (addresses.py), and
    # the one its request in flight holds: its own, or a hop's target's (hops.py).
    ip_wait: str | None = None
    ip: str | None = None
    # The host its request in flight goes to, when another (robots.txt redirected
    # there: hops.py); the host whose queue it waits in, or whose turn it has.
    hop: str | None = None
    hop_wait: str | None = None
    # How the host answers (throttle.py), once it has: its delay follows it.
    pace: Pace | None = None
    # Under a ranked order: score added to entries in ``queue`` since they were
    # loaded (ranking.FIRST: a retry, which goes first).
    credit: dict[int, float] = field(default_factory=dict)
    # Under a ranked order: no entry in ``queue`` scores less (-inf: not known), so a
    # new entry no better than it cannot take a full window's worst place, and the
    # window need not be scanned. Scores in the window only rise (credits) or leave.
    floor: float = -math.inf
    # Under a ranked order: where the window's best entry is, as found when the host
    # came due (windows.py), kept for its pop while the window stays as it is (-1: not
    # known). The window was scanned twice a request, for 2% of a crawl's CPU.
    best: int = -1
    # Pages fetched before, due again (--recrawl): a heap (see DueItem).
    refresh: list[DueItem] = field(default_factory=list)
    # One of its schemes backed off, if any (see SchemeBackoff).
    backoff: SchemeBackoff | None = None

    @property
    def robots_tries(self) -> int:
        """Tries of its robots.txt that failed while it has no rules: its pages wait
        for them (0 once rules came, a refetch's failures too: the old rules serve)."""
        tries = self.robots_attempts if self.robots_state is HostRobots.UNKNOWN else 0
        return max(tries, 0 if self.backoff is None else self.backoff.robots_attempts)

    def due_anew(self, due: list[tuple[float, int, Entry]]) -> None:
        """Its pages due again: (when, tie-breaker, entry), in place of those it had."""
        self.refresh = [due_item(at, tie, entry) for at, tie, entry in due]
        heapq.heapify(self.refresh)

    def due_again(self, at: float, tie: int, entry: Entry) -> None:
        heapq.heappush(self.refresh, due_item(at, tie, entry))

    def first_due(self) -> Entry:
        """The page due again first (there is one)."""
        return due_entry(self.refresh[0])

    def pop_due(self) -> Entry:
        return due_entry(heapq.heappop(self.refresh))

    @property
    def has_work(self) -> bool:
        """Whether it has URLs to ask in its window or on disk (not those set aside)."""
        return bool(self.queue) or self.on_disk > 0

    @property
    def aside(self) -> Sequence[Entry]:
        """Its URLs set aside (see SchemeBackoff)."""
        return () if self.backoff is None else self.backoff.entries

    def ready_at(self) -> float | None:
        """When the host may next be asked: the end of its delay if it has URLs, else
        when its first page is due again or its URLs set aside come back; None if none."""
        backoff = self.backoff
        if backoff is not None and backoff.full:
            return max(self.next_allowed, backoff.until)
        if self.has_work:
            return self.next_allowed
        times = [self.refresh[0][0]] if self.refresh else []
        if backoff is not None and backoff.entries:
            times.append(backoff.until)
        return max(self.next_allowed, min(times)) if times else None
