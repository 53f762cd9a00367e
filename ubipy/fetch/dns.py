"""Name resolution as a stage of its own, before a host's first request.

Mercator and Heritrix resolve before fetching, so a name that does not resolve
costs a lookup, not one of the fetch slots: here a host's slot asks for a lookup
(:class:`~ubipy.fetch.politeness.JobKind` ``RESOLVE``) and the crawler runs it on
the resolver's own bounded pool, with a time-out. Answers are cached for
``ttl`` (the system resolver does not report the record's TTL) and failures for
a shorter while, so a host costs one lookup until its answer expires. When the
resolver fails after an answer expired, the last address stands for a while
(RFC 8767's serve-stale): the resolver's outage is not the host's.

The address a host resolved to is also the key of the per-IP politeness rule,
and the one the transport connects to (:meth:`Resolver.pinned`): a name cannot
resolve to one address when checked and another when connected (DNS rebinding).
If it does not answer, the transport tries the answer's others (a few are kept,
:data:`MAX_ADDRESSES`), all checked alike, and the one that answered comes first from
then on, in the name's later answers too (:meth:`Resolver.demote`): the per-IP key
follows it from the host's next lookup.
Addresses that are not globally routable (loopback, private, link-local,
unspecified, a cloud's metadata service at 169.254.169.254) are refused unless
the user allows them, or a seed was on that host.

Behind a proxy (or a transport injected by a test) the proxy resolves and
connects; only names given with ``--resolve`` and IP literals are then looked at
here, for the per-IP rule and the refusal of addresses.
"""

from __future__ import annotations

import enum
import ipaddress
import itertools
import logging
import math
import socket
from collections import Counter, deque
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, replace

import trio

from ubipy.config import DnsConfig
from ubipy.fetch.lookupthreads import PER_DOMAIN, Domains, Ticket, getaddrinfo
from ubipy.fetch.urls import BadURL, host_key, ip_literal, normalize, registered_domain

log = logging.getLogger(__name__)

# A failed lookup is asked again after this long at the earliest (the host's own
# retry waits longer): negative answers are often short-lived.
FAILURE_TTL = 30.0
# A name's first lookup gets this long at most (its later ones the full time-out):
# lookups wait for a place in a bounded pool, and a few hundred names whose servers
# never answer would otherwise keep the live hosts' lookups queued behind them for
# the whole time-out. Most names answer in milliseconds; one that needs more is
# asked again after its host's back-off, with the full time.
FIRST_TIMEOUT = 1.0
# A name whose answer expired and whose resolver then fails (no answer, a time-out)
# keeps its last address this long past the expiry (RFC 8767's serve-stale, which
# suggests one to three days), asked again every FAILURE_TTL meanwhile: a resolver's
# outage is not the host's, and would otherwise give up every host whose answer
# expired during it.
STALE_LIMIT = 86400.0

SystemLookup = Callable[[str], Awaitable[list[str]]]


class DnsFailure(enum.Enum):
    """Why a name gave no address."""

    NO_SUCH_NAME = "dns: no such name"
    TEMPORARY = "dns: temporary failure"
    TIMEOUT = "dns: lookup timed out"
    REFUSED = "refused: not a public address"


# An answer's addresses kept, at most: the transport tries them in turn. A hostile
# zone may answer a name with thousands (about 4,000 fit a DNS answer over TCP), and
# every one was kept: 2,000 such names held 511 MiB (a review).
MAX_ADDRESSES = 8
# An answer's addresses looked at, at most: each is parsed and judged, once a lookup.
_SCANNED = 64


@dataclass(frozen=True, slots=True)
class Lookup:
    """A lookup's answer: the addresses (the first :data:`MAX_ADDRESSES`), or why
    there are none.

    ``refused``: how many of the answer's addresses were left out as not public
    (those looked at: the first ``_SCANNED``) when a public one was kept; ``reachable``:
    every address kept may be reached from any host (public ones, or private ones
    allowed), so they are not judged again at each resolve."""

    addresses: tuple[str, ...] = ()
    error: DnsFailure | None = None
    refused: int = 0
    reachable: bool = False

    @property
    def address(self) -> str | None:
        """The address requests go to (the others if it does not answer), and the
        per-IP politeness key."""
        return self.addresses[0] if self.addresses else None


def split_host(host: str) -> str:
    """The name (or IP literal, without brackets) of a ``host[:port]`` key."""
    if host.startswith("["):
        return host[1 : host.index("]")]
    name, _, _ = host.partition(":")
    return name


# IPv6 prefixes that carry an IPv4 address in their last 32 bits, judged as that
# address: a NAT64 gateway (RFC 6052's well-known prefix, common on IPv6-only cloud
# networks) carries 64:ff9b::a9fe:a9fe to 169.254.169.254, and SIIT's translated and
# the deprecated compatible forms may be routed likewise.
_EMBEDS_V4 = tuple(
    ipaddress.IPv6Network(prefix) for prefix in ("64:ff9b::/96", "::ffff:0:0:0/96", "::/96")
)
# Local-use NAT64 (RFC 8215; its IPv4 address may sit at several offsets) and the
# site-local prefix RFC 3879 deprecated: local by definition.
_LOCAL_V6 = tuple(ipaddress.IPv6Network(prefix) for prefix in ("64:ff9b:1::/48", "fec0::/10"))
# Special-use ranges that Python 3.11's ipaddress counts as global (later versions know
# some of them): IETF protocol assignments (but the two anycast services there), the
# 6to4 relay anycast, SRv6 SIDs and IPv6's second documentation prefix. Listed, the
# verdict does not hang on the interpreter.
_SPECIAL = tuple(
    ipaddress.ip_network(prefix)
    for prefix in ("192.0.0.0/24", "192.88.99.0/24", "5f00::/16", "3fff::/20")
)
_SPECIAL_GLOBAL = frozenset(ipaddress.ip_address(a) for a in ("192.0.0.9", "192.0.0.10"))
# Cloud machines' metadata services, which hand out credentials: a seed's allowance
# reaches them only for a seed on that very address, never through a name. Link-local
# (AWS, GCP, Azure, ...), AWS's IPv6 one, Alibaba Cloud's and Oracle Cloud Classic's.
_METADATA = tuple(
    ipaddress.ip_network(prefix)
    for prefix in (
        "169.254.0.0/16",
        "fe80::/10",
        "fd00:ec2::/32",
        "100.100.100.200/32",
        "192.0.0.192/32",
    )
)


# The cache is swept of what it no longer needs once it holds this many names (and
# twice as many as after the last sweep).
_SWEEP_AT = 4096
# Names demoted and not yet taken by the DNS stage, kept at most.
_DEMOTED_KEPT = 256
# Names whose answers are kept, at most (about 400 bytes each): past it, expired
# answers (kept a day to serve stale) go first, the soonest expired first. A broad
# crawl meeting 50 new names a second held 4 million of them a day, 1.7 GB.
MAX_NAMES = 200_000


def _forgotten(answer: Lookup, until: float, now: float) -> bool:
    return until <= now - (STALE_LIMIT if answer.error is None else 0.0)


def _to_back(addresses: tuple[str, ...], dead: Collection[str]) -> tuple[str, ...]:
    """``addresses`` with those in ``dead`` moved to the back, unless all are."""
    kept = tuple(a for a in addresses if a not in dead)
    if not kept or len(kept) == len(addresses):
        return addresses
    return kept + tuple(a for a in addresses if a in dead)


def _loopback_name(name: str) -> bool:
    """``localhost`` and the names under it (RFC 6761), loopback by definition."""
    name = name.lower().rstrip(".")
    return name == "localhost" or name.endswith(".localhost")


def address_key(address: str) -> str:
    """The per-IP rule's key for an address: an IPv6 address that carries an IPv4
    one (mapped, compatible, NAT64's prefixes) is that IPv4 address, the same server
    reached another way (http://[::ffff:1.2.3.4]/ and http://1.2.3.4/ shared no key,
    and had a request each in flight to it). Others are as written, IPv6 compressed."""
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        if any(ip in net for net in _EMBEDS_V4) and int(ip) > 1:  # not :: or ::1
            return str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return str(ip)


_IP = ipaddress.IPv4Address | ipaddress.IPv6Address


def _judged(ip: _IP) -> _IP:
    """The address ``ip`` is judged as: an IPv6 address that carries an IPv4 one
    (mapped, translated, compatible, NAT64, 6to4) is the IPv4 address."""
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return ip.ipv4_mapped
        if ip.sixtofour is not None:
            return ip.sixtofour
        if any(ip in net for net in _EMBEDS_V4) and int(ip) > 1:  # not :: or ::1
            return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip


def is_public(address: str) -> bool:
    """Whether a crawler may reach ``address`` without being told to: globally
    routable and not multicast, judged as :func:`_judged` says."""
    ip = ipaddress.ip_address(address)
    if any(ip in net for net in _LOCAL_V6):
        return False
    ip = _judged(ip)
    if any(ip in net for net in _SPECIAL) and ip not in _SPECIAL_GLOBAL:
        return False
    return ip.is_global and not ip.is_multicast


def cloud_metadata(host: str) -> bool:
    """Whether ``host`` (``HOST[:PORT]``) is on an address of a cloud machine's
    metadata service (or one that carries it); a name is not."""
    address = ip_literal(split_host(host))
    return address is not None and _metadata(address)


def _allowable(host: str, addresses: Iterable[str]) -> frozenset[str]:
    """What a seed's first lookup of ``host`` may allow of ``addresses``: a metadata
    service's only for a seed on that very address, never through a name."""
    literal = ip_literal(split_host(host)) is not None
    return frozenset(a for a in addresses if literal or not _metadata(a))


def _metadata(address: str) -> bool:
    ip = _judged(ipaddress.ip_address(address))
    return any(ip in net for net in _METADATA if ip.version == net.version)


class _Flight:
    """A lookup under way, awaited by any other asking for the same name meanwhile."""

    __slots__ = ("answer", "done")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.answer: Lookup | None = None


def _as_hosts_are(name: str) -> str:
    """A ``--resolve`` name as URLs' hosts are written: an internationalised one in
    punycode (given in Unicode, it matched no host and applied to nothing, unsaid: a
    review). One no URL could have is kept as given."""
    try:
        return host_key(normalize(f"http://{name}/"))
    except BadURL:
        return name


class Resolver:
    """Cached, bounded lookups of host names; see the module docstring.

    ``system``: look names up with the system resolver (off behind a proxy);
    ``overrides``: fixed answers (``--resolve``), which win over the system's;
    ``lookup``: the system lookup, injectable for tests.
    """

    def __init__(
        self,
        *,
        ttl: float = 3600.0,
        timeout: float = 5.0,
        concurrency: int = 128,
        system: bool = True,
        overrides: Mapping[str, tuple[str, ...]] | None = None,
        allow_private: bool = False,
        lookup: SystemLookup | None = None,
    ) -> None:
        self._ttl = ttl
        self._timeout = timeout
        self._timed_out: set[str] = set()  # names whose first lookup took too long
        self._limiter = trio.CapacityLimiter(concurrency)
        # Threads for getaddrinfo (without an injected ``lookup``): twice the lookups
        # at once, the rest for lookups abandoned at their time-out.
        self._threads = trio.CapacityLimiter(2 * concurrency) if lookup is None else None
        # A domain's names: half the lookups at once at most, a quarter of the threads.
        self._domains = Domains(max(1, min(PER_DOMAIN, concurrency // 2)))
        self._system = system
        self._overrides = {_as_hosts_are(name): a for name, a in (overrides or {}).items()}
        self._allow_private = allow_private
        self._lookup = lookup
        # name -> (answer, expires): names, not host keys, so ports share an answer.
        self._cache: dict[str, tuple[Lookup, float]] = {}
        # Hosts (HOST[:PORT]) whose non-public addresses were allowed because a seed was
        # on them: those addresses (a name rebound to another is not), that port only
        # (not every service of the address); and the seeds' hosts looked up so far.
        self._exempt: dict[str, frozenset[str]] = {}
        self._seeds_seen: set[str] = set()
        # Seeds' hosts whose first lookup was just made, and what it allowed (nothing:
        # a public address), for the peer to keep: after a restart, or where an earlier
        # run looked it up, a lookup is no first one (:meth:`remember`).
        self.first_lookups: list[tuple[str, frozenset[str]]] = []
        # Per name (while its answer is kept), answers not from the cache; in all, and
        # the most any one name took.
        self.lookups: Counter[str] = Counter()
        self.total_lookups = 0
        self.most_lookups = 0
        self.refused: Counter[str] = Counter()  # per name, addresses refused
        self._sweep_at = _SWEEP_AT
        self._flights: dict[str, _Flight] = {}  # lookups under way, by name
        # Names served their last address past its expiry, since when (it expired).
        self._stale_since: dict[str, float] = {}
        self.served_stale = 0  # lookups that failed and were answered so
        # Per name, the addresses that did not answer a connection when another of its
        # answer did, and have not since: kept at the back of its answers (demote).
        self._dead: dict[str, frozenset[str]] = {}
        # Names whose first address changed so (the DNS stage files their hosts again:
        # a robots.txt redirected to a host's name demotes its addresses, not the
        # requesting host's); a few, if nobody takes them.
        self.demoted: deque[str] = deque(maxlen=_DEMOTED_KEPT)

    @classmethod
    def of(cls, config: DnsConfig, *, system: bool) -> Resolver:
        """The resolver ``config`` asks for; ``system``: whether ubipy connects to
        hosts itself (no proxy, no injected transport), so names need looking up."""
        return cls(
            ttl=config.ttl,
            timeout=config.timeout,
            concurrency=config.lookups,
            system=system,
            overrides=config.overrides(),
            allow_private=config.allow_private,
        )

    @property
    def allow_private(self) -> bool:
        """Whether private addresses may be reached (``--allow-private``)."""
        return self._allow_private

    def wanted(self, host: str) -> bool:
        """Whether ``host`` goes through the resolution stage at all."""
        name = split_host(host)
        return (
            self._system
            or name in self._overrides
            or ip_literal(name) is not None
            or _loopback_name(name)
        )

    def exempt(self, host: str, answer: Lookup) -> bool:
        """A seed is on ``host`` (``HOST[:PORT]``) and ``answer`` is its lookup: if it is
        the host's first here and refused its addresses, they are allowed on that port
        from now on; True if any was. Not a later lookup's: allowed whatever it
        resolved to, a seeded name of public address rebound to 127.0.0.1 or the
        metadata service (DNS rebinding) was fetched (found by a review)."""
        refused = answer.error is DnsFailure.REFUSED
        if host in self._seeds_seen or not (refused or answer.address is not None):
            return False  # asked before, or no address yet (a failed lookup)
        self._seeds_seen.add(host)
        cached = self._cache.get(split_host(host))
        allowed: frozenset[str] = frozenset()
        if refused and cached is not None:
            allowed = _allowable(host, cached[0].addresses)
        self.first_lookups.append((host, allowed))
        if allowed:
            self._exempt[host] = allowed
        return bool(allowed)

    def first_lookup(self, host: str) -> frozenset[str] | None:
        """What ``host``'s first lookup as a seed's allowed here (None: none yet)."""
        return self._exempt.get(host, frozenset()) if host in self._seeds_seen else None

    def adopt(self, host: str, allowed: frozenset[str]) -> frozenset[str]:
        """A seed's ``host`` comes from a peer whose first lookup of it allowed
        ``allowed``: a first lookup here, but no more than one here allowed (a review),
        nor a metadata service's address for a name. Returns what is allowed now."""
        allowed = _allowable(host, allowed)
        if host in self._seeds_seen:
            allowed &= self._exempt.pop(host, frozenset())
        self.remember({host: allowed})
        return allowed

    def remember(self, first: Mapping[str, frozenset[str]]) -> None:
        """Seeds' hosts an earlier run looked up first, and what that allowed: a seeded
        name of public address rebound to 127.0.0.1 was allowed at the first lookup
        after a restart (found by a review)."""
        for host, allowed in first.items():
            self._seeds_seen.add(host)
            if allowed:
                self._exempt[host] = allowed

    def allowed(self, host: str, address: str) -> bool:
        return self._allow_private or address in self._exempt.get(host, ()) or is_public(address)

    def pinned(self, name: str) -> Lookup | None:
        """The cached answer for ``name`` (without brackets), if still fresh."""
        cached = self._cache.get(name)
        if cached is None or cached[1] <= trio.current_time():
            return None
        return cached[0]

    def address_of(self, host: str) -> str | None:
        """The first address of the cached answer for a ``host[:port]`` key (the one
        its requests go to), if the answer is fresh and has one."""
        answer = self.pinned(split_host(host))
        return None if answer is None else answer.address

    def fresh_until(self, host: str) -> float:
        """When the cached answer for a ``host[:port]`` key expires (-inf: none)."""
        cached = self._cache.get(split_host(host))
        return -math.inf if cached is None else cached[1]

    async def resolve(self, host: str) -> Lookup:
        """The answer for a ``host[:port]`` key, cached; addresses that are not
        allowed are refused (:attr:`DnsFailure.REFUSED`)."""
        name = split_host(host)
        answer = self.pinned(name)
        while answer is None and (flight := self._flights.get(name)) is not None:
            # Being looked up already (for another port of the name): one lookup, one
            # answer. Two at once got two answers of a round-robin name, and the per-IP
            # rule kept the first where requests went to the second.
            await flight.done.wait()
            answer = flight.answer  # None: that lookup was cancelled
        if answer is None:
            flight = self._flights[name] = _Flight()
            try:
                answer = flight.answer = await self._looked_up(name)
            finally:
                del self._flights[name]
                flight.done.set()
        if answer.address is not None and not answer.reachable:
            # Only the addresses that may be reached (the transport tries each in
            # turn): none public, they may be a seed's (see :meth:`exempt`).
            allowed = tuple(a for a in answer.addresses if self.allowed(host, a))
            if not allowed:
                self.refused[name] += 1
                return Lookup((), DnsFailure.REFUSED)
            return answer if len(allowed) == len(answer.addresses) else Lookup(allowed)
        return answer

    def demote(self, name: str, addresses: Collection[str]) -> None:
        """``addresses`` of ``name``'s answer did not answer a connection (another of
        them did): they go to the back of its cached answer, and the first of the others
        is the name's address from now on, the one the transport tries first. They stay
        at the back when the name is looked up again (until one of them answers when
        the others do not), so that its host is keyed on the address that answers."""
        cached = self._cache.get(name)
        if cached is None:
            return
        answer, until = cached
        moved = _to_back(answer.addresses, addresses)
        if moved == answer.addresses:
            return
        dead = self._dead.get(name, frozenset()) | frozenset(addresses)
        self._dead[name] = dead - {moved[0]}
        self._cache[name] = (replace(answer, addresses=moved), until)
        self.demoted.append(name)

    async def _looked_up(self, name: str) -> Lookup:
        """A lookup of ``name`` (not from the cache), cached as it says."""
        if len(self.lookups) >= self._sweep_at:  # names that time out are never cached
            self._sweep(trio.current_time())
        count = self.lookups[name] = self.lookups[name] + 1
        self.total_lookups += 1
        self.most_lookups = max(self.most_lookups, count)
        answer = await self._ask(name)
        now = trio.current_time()
        if (dead := self._dead.get(name)) is not None and answer.error is None:
            answer = replace(answer, addresses=_to_back(answer.addresses, dead))
            self._dead[name] = dead.intersection(answer.addresses)
        if answer.error in (DnsFailure.TEMPORARY, DnsFailure.TIMEOUT):
            answer = self._stale(name, now) or answer
        else:
            self._stale_since.pop(name, None)
        if answer.error is not DnsFailure.TIMEOUT:  # not an answer: ask again
            fresh = answer.error is None and name not in self._stale_since
            ttl = self._ttl if fresh else min(self._ttl, FAILURE_TTL)
            if len(self._cache) >= self._sweep_at:
                self._sweep(now)
            self._cache[name] = (answer, now + ttl)
        return answer

    def _sweep(self, now: float) -> None:
        """Forget the names whose answers are of no more use: failures expired, and
        addresses expired past serving them stale. A crawl meets millions of names, a
        few hundred bytes each; the next sweep waits until the cache has doubled."""
        cache = self._cache
        for name in [n for n, (answer, until) in cache.items() if _forgotten(answer, until, now)]:
            del cache[name]
            self._stale_since.pop(name, None)
        if len(cache) >= MAX_NAMES:
            # To half the bound, the soonest expired first: answers kept to serve
            # stale, then (a crawl meeting more names an hour than the bound) fresh
            # ones, looked up again when asked.
            excess = len(cache) - MAX_NAMES // 2
            for name in sorted(cache, key=lambda n: cache[n][1])[:excess]:
                del cache[name]
                self._stale_since.pop(name, None)
        # Names with nothing cached: their lookups timed out (an answer it was not).
        for table in (self.lookups, self.refused):
            for name in [n for n in table if n not in cache and n not in self._flights]:
                del table[name]
        for name in [n for n in self._dead if n not in cache]:
            del self._dead[name]
        self._timed_out.intersection_update(cache.keys() | self._flights.keys())
        self._sweep_at = min(MAX_NAMES, max(_SWEEP_AT, 2 * max(len(cache), len(self.lookups))))

    def _stale(self, name: str, now: float) -> Lookup | None:
        """The last address of ``name``, if its resolver failed within STALE_LIMIT of
        the answer's expiry."""
        cached = self._cache.get(name)
        if cached is None or cached[0].error is not None:
            return None
        since = self._stale_since.get(name)
        if since is None:
            since = self._stale_since[name] = cached[1]
            log.info("%s: the resolver failed; its last address stands meanwhile", name)
        if now - since > STALE_LIMIT:
            # Dropped with it: a time-out's failure is not cached, and the answer,
            # cached again at each stale serving, would start the limit afresh (a
            # name whose servers stopped answering kept its address for ever).
            del self._stale_since[name]
            del self._cache[name]
            return None
        self.served_stale += 1
        return cached[0]

    def _kept(self, found: Iterable[str]) -> Lookup:
        """The part of an answer that is kept: its first MAX_ADDRESSES addresses that
        may be reached from any host (public ones; private ones too when allowed), or,
        with none such, its first non-public ones (a seed may be on them). Only the
        first _SCANNED are looked at."""
        reachable: dict[str, None] = {}
        others: dict[str, None] = {}
        for text in itertools.islice(found, _SCANNED):
            address = ip_literal(text)
            if address is None or address in reachable or address in others:
                continue
            if self._allow_private or is_public(address):
                reachable[address] = None
                if len(reachable) == MAX_ADDRESSES:
                    break
            else:
                others[address] = None
        if reachable:
            return Lookup(tuple(reachable), refused=len(others), reachable=True)
        if others:
            return Lookup(tuple(others)[:MAX_ADDRESSES])
        return Lookup((), DnsFailure.NO_SUCH_NAME)

    async def _ask(self, name: str) -> Lookup:
        address = ip_literal(name)
        if address is not None:
            return self._kept((address,))
        if _loopback_name(name):
            # RFC 6761: the loopback's, whoever is asked; behind a proxy the proxy's
            # own loopback, refused as such.
            return self._kept(("127.0.0.1",))
        fixed = self._overrides.get(name)
        if fixed is not None:
            return self._kept(fixed)
        if not self._system:
            return Lookup((), DnsFailure.NO_SUCH_NAME)
        ticket = None
        if self._threads is not None:
            ticket = Ticket(self._threads, self._domains, registered_domain(name))
        try:
            if ticket is not None:
                # Not timed either: a domain of many names is not slow for being queued
                # for its share, and waiting here holds none of the lookups at once.
                await ticket.take_domain()
            async with self._limiter:
                patience = self._timeout
                if name not in self._timed_out:
                    patience = min(patience, FIRST_TIMEOUT)
                if ticket is not None:
                    await ticket.take()  # not timed: see Ticket
                return await self._timed(name, patience, ticket)
        finally:
            if ticket is not None and not ticket.handed:
                ticket.release_on_behalf_of(None)  # no thread started

    async def _timed(self, name: str, patience: float, ticket: Ticket | None) -> Lookup:
        with trio.move_on_after(patience):
            try:
                if ticket is not None:
                    found = await getaddrinfo(name, ticket, _SCANNED)
                else:
                    assert self._lookup is not None
                    found = await self._lookup(name)
            except socket.gaierror as exc:
                if exc.errno in (socket.EAI_AGAIN, getattr(socket, "EAI_SYSTEM", None)):
                    return Lookup((), DnsFailure.TEMPORARY)
                return Lookup((), DnsFailure.NO_SUCH_NAME)
            except (OSError, UnicodeError):
                return Lookup((), DnsFailure.NO_SUCH_NAME)
            return self._kept(found)
        self._timed_out.add(name)
        return Lookup((), DnsFailure.TIMEOUT)
