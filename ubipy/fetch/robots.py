"""robots.txt per RFC 9309: the rules (via protego) and a fetch state machine.

`RobotsFetch` does no I/O, in the style of h11: the caller performs each HTTP
request for `.url` and feeds the outcome in; the machine says whether to
request again (a redirect) or hands back a `RobotsDecision`. Back-off and
attempt counting for temporary failures stay with the caller, who owns the
clock.
"""

from __future__ import annotations

# The codec robots.txt is read with, imported now: imported at the first robots.txt, by a
# peer out of file descriptors, it failed, and the peer exited (QA, a cluster peer under
# ulimit -n 40).
import encodings.utf_8_sig  # noqa: F401
import enum
import functools
import itertools
import math
import re
import string
from dataclasses import dataclass
from typing import Final

from protego import Protego

from ubipy.errors import UbipyError
from ubipy.fetch.robotsindex import RuleIndex, let_go, rule_index
from ubipy.fetch.urls import BadURL, normalize

__all__ = [
    "LARGE_ROBOTS",
    "MAX_REDIRECTS",
    "MAX_SITEMAPS",
    "PRODUCT_TOKEN",
    "ROBOTS_FETCH_BYTES",
    "ROBOTS_MAX_BYTES",
    "ROBOTS_UNREACHABLE",
    "RobotsDecision",
    "RobotsFetch",
    "RobotsFetchError",
    "RobotsOutcome",
    "RobotsRules",
    "RobotsState",
    "retry_delay",
    "robots_token",
]

# RFC 9309 §2.5: crawlers must parse at least the first 500 KiB.
ROBOTS_MAX_BYTES: Final = 500 * 1024
#: A robots.txt of this many bytes or more is parsed by a thread, one at a time (the
#: peer's PageAnswersMixin), never on the event loop: one of 500 KiB and 18,681
#: wildcard rules takes protego 239 ms, and 40 hosts' came in one batch of the loop
#: (QA: 5.3 s, peers declared dead).
LARGE_ROBOTS: Final = 64 * 1024
# What a robots.txt fetch reads: one byte past the cap tells a body cut there (its
# last line cut short, dropped by :meth:`RobotsRules.parse`) from one that ends there.
ROBOTS_FETCH_BYTES: Final = ROBOTS_MAX_BYTES + 1
# This crawler's product token by default, and the name its group is given for
# protego whatever the token (``_agents_named``).
PRODUCT_TOKEN: Final = "ubipy"
# A product with its version: "acmebot/1.0"; the first that is not Mozilla's names the
# crawler ("Mozilla/5.0 (compatible; Googlebot/2.1; +http://...)" is Googlebot).
_PRODUCT = re.compile(r"([A-Za-z_-]+)/")


@functools.cache
def robots_token(user_agent: str) -> str:
    """The product token robots.txt groups (and meta robots) name the crawler by, of
    its User-Agent (RFC 9309 2.2.1: [a-zA-Z_-]+, without case): the first product
    with a version that is not Mozilla's, else its leading token, else ``ubipy``."""
    for found in _PRODUCT.finditer(user_agent):
        token = found.group(1).lower()
        if token != "mozilla":
            return token
    leading = re.match(r"[A-Za-z_-]+", user_agent.strip())
    return leading.group().lower() if leading else PRODUCT_TOKEN


# RFC 9309 §2.3.1.2: follow at least five consecutive redirects.
MAX_REDIRECTS: Final = 5
# Sitemap lines kept of one robots.txt; the rest are counted (``sitemaps_over``).
MAX_SITEMAPS: Final = 1_000


#: Why a host's URLs are closed when its robots.txt could not be had after the attempts.
ROBOTS_UNREACHABLE = "robots.txt unreachable"


class _Mode(enum.Enum):
    ALLOW_ALL = enum.auto()
    DISALLOW_ALL = enum.auto()
    PARSED = enum.auto()


class RobotsRules:
    """The robots.txt rules of one host, as they apply to `PRODUCT_TOKEN`."""

    __slots__ = (
        "_crawl_delay",
        "_index",
        "_mode",
        "_parser",
        "closed_for",
        "sitemaps",
        "sitemaps_over",
    )

    def __init__(self, mode: _Mode, parser: Protego | None = None) -> None:
        self._mode = mode
        self._parser = parser
        self._crawl_delay: float | None = None
        # Why no URL may be asked, when the rules could not be had at all (see closed).
        self.closed_for: str | None = None
        # The Sitemap lines, as written (whatever the group: they stand apart from it).
        self.sitemaps: tuple[str, ...] = ()
        self.sitemaps_over = 0
        # Many rules: kept compact, matched through an index (robotsindex), and
        # protego's objects let go.
        self._index: RuleIndex | None = None
        if parser is not None:
            self._index = rule_index(parser, PRODUCT_TOKEN)
            if self._index is not None:
                let_go(parser)
                self._parser = None
            listed = parser.sitemaps
            self.sitemaps = tuple(itertools.islice(listed, MAX_SITEMAPS))
            self.sitemaps_over = sum(1 for _ in listed)
            # Asked once here rather than per scheduling decision.
            delay = parser.crawl_delay(PRODUCT_TOKEN)
            if delay is not None and math.isfinite(delay) and delay >= 0:
                self._crawl_delay = float(delay)

    @classmethod
    def allow_all(cls) -> RobotsRules:
        return cls(_Mode.ALLOW_ALL)

    @classmethod
    def disallow_all(cls) -> RobotsRules:
        return cls(_Mode.DISALLOW_ALL)

    @classmethod
    def closed(cls, reason: str) -> RobotsRules:
        """No rules could be had, for ``reason`` (the robots.txt unreachable, its
        certificate refused): nothing is asked, and what is not is closed saying why."""
        rules = cls(_Mode.DISALLOW_ALL)
        rules.closed_for = reason
        return rules

    @classmethod
    def parse(cls, body: bytes, agent: str = PRODUCT_TOKEN) -> RobotsRules:
        """Rules from a robots.txt body for the crawler whose product token is
        ``agent`` (see :func:`robots_token`); never raises on hostile bytes."""
        if len(body) > ROBOTS_MAX_BYTES:
            line_complete = body[ROBOTS_MAX_BYTES : ROBOTS_MAX_BYTES + 1] in (b"\n", b"\r")
            body = body[:ROBOTS_MAX_BYTES]
            if not line_complete:
                # A truncated rule ("Allow: /pub" cut from "Allow: /public/")
                # would widen or narrow what it says; a partial last line is
                # dropped rather than misread.
                newline = max(body.rfind(b"\n"), body.rfind(b"\r"))
                body = body[: newline + 1]
        # utf-8-sig: a leading BOM would otherwise glue itself to the first
        # field name and hide the first "User-agent" line.
        text = body.decode("utf-8-sig", errors="replace")
        return cls(_Mode.PARSED, Protego.parse(_agents_named(text, agent)))

    def allowed(self, url: str) -> bool:
        """Whether `url` (a normalised URL, or its path and query) may be fetched."""
        if self._mode is _Mode.ALLOW_ALL:
            return True
        if self._mode is _Mode.DISALLOW_ALL:
            return False
        if url.startswith("//"):
            # Protego splits its argument as a URL; a bare path "//x" would be
            # read as an authority, so give it a dummy one.
            url = "http://robots.invalid" + url
        if self._index is not None:
            return self._index.can_fetch(url)
        return self._parser.can_fetch(url, PRODUCT_TOKEN) if self._parser is not None else True

    @property
    def crawl_delay(self) -> float | None:
        return self._crawl_delay

    def __repr__(self) -> str:
        return f"RobotsRules({self._mode.name}, crawl_delay={self._crawl_delay})"


# How protego names a User-agent field (it reads "Useragent" and "User agent" too).
_AGENT_FIELDS: Final = frozenset({"user-agent", "useragent", "user agent"})
# The characters of a value's product token (RFC 9309 2.2.1: [a-zA-Z_-]+).
_TOKEN_CHARS: Final = string.ascii_letters + "_-"
# What every agent but this crawler and ``*`` is called for protego.
_OTHER_AGENT: Final = f"not-{PRODUCT_TOKEN}"


def _agents_named(text: str, agent: str) -> str:
    """The robots.txt with every User-agent line naming this crawler (``agent``, as
    ``ubipy`` for protego), ``*`` or one other agent, as RFC 9309 and Google's parser
    read them: by the value's product token,
    matched whole and without case. protego finds a group's value inside the
    crawler's name ('ubi', a prefix of ubipy, was taken for ubipy's group, and
    'ubipy/1.0' was not), and gives every rule of a group to each of its agents: a
    file of a few thousand distinct agents in one group took seconds and gigabytes to
    parse. Lines are split as protego splits them (CR alone ends one too).

    An infinite Crawl-delay (``inf``, ``1e400``) asks for the slowest crawl there is;
    protego drops it as malformed, and the host got the default delay. It becomes
    the largest finite one, for the max_crawl_delay setting to cap."""
    lines = text.splitlines()
    for n, line in enumerate(lines):
        lower = line.lower()
        if "agent" in lower and (value := _agent_value(line)):
            star = value == "*" or value.startswith(("* ", "*\t"))
            token = value[: len(value) - len(value.lstrip(_TOKEN_CHARS))].lower()
            named = "*" if star else PRODUCT_TOKEN if token == agent else _OTHER_AGENT
            lines[n] = f"User-agent: {named}"
        elif "delay" in lower and _infinite_delay(line):
            lines[n] = "Crawl-delay: 1e300"
    return "\n".join(lines)


def _infinite_delay(line: str) -> bool:
    """Whether ``line`` is a Crawl-delay of +infinity as protego reads the line."""
    field, colon, value = line.split("#", 1)[0].partition(":")
    if not colon or field.strip().lower() not in ("crawl-delay", "crawl delay"):
        return False
    try:
        return float(value.strip()) == math.inf
    except ValueError:
        return False


def _agent_value(line: str) -> str | None:
    """The value of a User-agent line as protego reads the line, else None."""
    line = line.split("#", 1)[0].strip()
    if ":" in line:
        field, value = line.split(":", 1)
        if field.strip().lower() in _AGENT_FIELDS:
            return value.strip()
        if not value or value[0].isspace():
            return None  # another field, known or not
    words = line.split()
    for count in (1, 2):  # "User-agent foo", "User agent foo"
        if " ".join(words[:count]).lower() in _AGENT_FIELDS:
            return " ".join(words[count:])
    return None


class RobotsOutcome(enum.Enum):
    PARSED = "parsed"  # 2xx: the body's rules apply
    UNAVAILABLE = "unavailable"  # 4xx or unusable redirect: allow all (§2.3.1.3)
    UNREACHABLE = "unreachable"  # 5xx or network error: disallow all (§2.3.1.4)
    TOO_MANY_REDIRECTS = "too_many_redirects"  # allow all (§2.3.1.2)


@dataclass(frozen=True, slots=True)
class RobotsDecision:
    rules: RobotsRules
    outcome: RobotsOutcome
    # True when the caller should fetch robots.txt again after a back-off
    # (see `retry_delay`) instead of caching the rules for the usual lifetime.
    temporary: bool


class RobotsState(enum.Enum):
    AWAITING_RESPONSE = "awaiting_response"
    DONE = "done"


class _Event(enum.Enum):
    SUCCESS = enum.auto()
    REDIRECT = enum.auto()
    REDIRECT_LIMIT = enum.auto()
    UNAVAILABLE = enum.auto()
    UNREACHABLE = enum.auto()


# The only legal transitions, in one place as h11 keeps them. Anything not
# listed (e.g. feeding a response after the decision) is a caller bug.
_TRANSITIONS: Final[dict[RobotsState, dict[_Event, RobotsState]]] = {
    RobotsState.AWAITING_RESPONSE: {
        _Event.SUCCESS: RobotsState.DONE,
        _Event.REDIRECT: RobotsState.AWAITING_RESPONSE,
        _Event.REDIRECT_LIMIT: RobotsState.DONE,
        _Event.UNAVAILABLE: RobotsState.DONE,
        _Event.UNREACHABLE: RobotsState.DONE,
    },
    RobotsState.DONE: {},
}

# The final events' meaning: (outcome, temporary). SUCCESS is absent because
# its rules come from the body.
_FAILURE_OUTCOMES: Final[dict[_Event, tuple[RobotsOutcome, bool]]] = {
    _Event.REDIRECT_LIMIT: (RobotsOutcome.TOO_MANY_REDIRECTS, False),
    _Event.UNAVAILABLE: (RobotsOutcome.UNAVAILABLE, False),
    _Event.UNREACHABLE: (RobotsOutcome.UNREACHABLE, True),
}


class RobotsFetchError(UbipyError, RuntimeError):
    """An event fed to a `RobotsFetch` in a state that cannot take it."""


class RobotsFetch:
    """The fetch of one host's robots.txt, following redirects. No I/O."""

    __slots__ = ("_agent", "_decision", "_redirects", "_state", "start", "url")

    def __init__(self, url: str, agent: str = PRODUCT_TOKEN) -> None:
        """``agent``: the crawler's product token, whose group applies."""
        self._agent = agent
        self.url = url  # what to request next
        self.start = url  # the host's own /robots.txt, whatever the redirects
        self._state = RobotsState.AWAITING_RESPONSE
        self._redirects = 0
        self._decision: RobotsDecision | None = None

    @property
    def state(self) -> RobotsState:
        return self._state

    @property
    def redirects(self) -> int:
        return self._redirects

    @property
    def decision(self) -> RobotsDecision | None:
        return self._decision

    def on_response(
        self, status: int, location: str | None, body: bytes, rules: RobotsRules | None = None
    ) -> RobotsDecision | None:
        """Feed the response to a request for `.url`; None means request `.url` again.
        ``rules``: the body's, parsed already (a large one, beside the event loop)."""
        if 200 <= status < 300:
            self._transition(_Event.SUCCESS)
            if rules is None:
                rules = RobotsRules.parse(body, self._agent)
            decision = RobotsDecision(rules, RobotsOutcome.PARSED, False)
            self._decision = decision
            return decision
        if 300 <= status < 400:
            return self._on_redirect(location)
        if 400 <= status < 500 and status != 429:
            return self._finish(_Event.UNAVAILABLE)
        # 5xx, 429 ("too many requests": the server is there and says "not now", as
        # Google reads it) and statuses no server should send: assume the worst but
        # only for now, since an unreadable robots.txt must not stop a host forever.
        return self._finish(_Event.UNREACHABLE)

    def on_error(self) -> RobotsDecision | None:
        """A network error or time-out on the request for `.url`."""
        return self._finish(_Event.UNREACHABLE)

    def _on_redirect(self, location: str | None) -> RobotsDecision | None:
        target: str | None = None
        if location and not location.isspace():
            try:
                target = normalize(location, self.url)
            except BadURL:
                target = None
        if target is None:
            return self._finish(_Event.UNAVAILABLE)
        if self._redirects >= MAX_REDIRECTS:
            return self._finish(_Event.REDIRECT_LIMIT)
        self._transition(_Event.REDIRECT)
        self._redirects += 1
        self.url = target
        return None

    def _finish(self, event: _Event) -> RobotsDecision:
        self._transition(event)
        outcome, temporary = _FAILURE_OUTCOMES[event]
        rules = RobotsRules.disallow_all() if temporary else RobotsRules.allow_all()
        decision = RobotsDecision(rules, outcome, temporary)
        self._decision = decision
        return decision

    def _transition(self, event: _Event) -> None:
        try:
            self._state = _TRANSITIONS[self._state][event]
        except KeyError:
            raise RobotsFetchError(f"{event.name} in state {self._state.name}") from None


def retry_delay(attempt: int, base: float, cap: float = 3600.0) -> float:
    """Seconds to wait before retry number `attempt` (1 = first retry): base·2^(attempt-1), capped.

    Deterministic on purpose: jitter, if wanted, belongs to the caller's clock.
    """
    # The exponent is clamped so huge attempt counts cannot overflow a float.
    exponent = min(max(attempt, 1) - 1, 64)
    return float(min(cap, base * (2.0**exponent)))
