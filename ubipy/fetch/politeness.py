"""The politeness scheduler: one slot per host, one request in flight per host.

A slot holds a window of the host's frontier in memory (the rest stays on disk and is
loaded through ``loader`` when the window runs dry: windows.py), whether a request is
in flight, the host's delay and the time its next request is allowed. Hosts that are
ready wait in a heap keyed by that time. robots.txt is resolved through the same slot
before the host's first page, so its requests obey the same politeness as pages; a
redirect of it to another host waits for that host's (hops.py), and for that host's
address, not its own (addresses.py). Once a host's rules are older than the TTL
(``robots_ttl``, RFC 9309 §2.4: a day) its next request asks robots.txt again first,
through the same slot; while that refetch fails the old rules stand (a cached copy
serves while robots.txt is unreachable) and it is tried again after the usual back-off.

A request that failed backs its host off, or only its scheme when it made no
connection (backoffs.py). Among the hosts whose time has come, the crawl order
(``--order``, ranking.py) chooses which goes next and which of its URLs; a continuous
crawl (``--recrawl``) adds, per host, the pages due again, which take at most their
share of requests while new URLs wait.

No I/O and no clock: the caller passes ``now`` in and performs the requests.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

from ubipy.config import CrawlConfig, CrawlOrder
from ubipy.fetch.addresses import AddressRule
from ubipy.fetch.backoffs import Backoffs
from ubipy.fetch.duehosts import DueHosts
from ubipy.fetch.hops import HopRule, target_of
from ubipy.fetch.idlehosts import IdleHosts
from ubipy.fetch.lookupanswers import LookupAnswers
from ubipy.fetch.refreshshare import RefreshShare
from ubipy.fetch.robots import (
    PRODUCT_TOKEN,
    RobotsRules,
    RobotsState,
    robots_token,
)
from ubipy.fetch.robotsrule import RobotsRule
from ubipy.fetch.sitemaps import is_sitemap
from ubipy.fetch.slots import Entry, HostRobots, HostSlot, Job, JobKind, Loader, Recall
from ubipy.fetch.throttle import Pace, SlowestHosts, SlowHost, ThrottleRules
from ubipy.fetch.windows import Windows

__all__ = ["Entry", "HostRobots", "Job", "JobKind", "Scheduler"]

# The wait after a request found the proxy down, doubled while it stays down.
_PROXY_WAIT = 1.0
_PROXY_WAIT_MAX = 60.0


class Scheduler(LookupAnswers, Backoffs):
    def __init__(
        self,
        *,
        delay: float,
        window: int,
        loader: Loader,
        max_crawl_delay: float = 60.0,
        robots_retry_base: float = 30.0,
        robots_max_attempts: int = 3,
        robots_ttl: float = 86400.0,
        max_pages_per_host: int | None = None,
        max_in_memory: int = 200_000,
        resolve: Callable[[str], bool] | None = None,
        ip_delay: float | None = None,
        throttle: ThrottleRules | None = None,
        order: CrawlOrder = CrawlOrder.BFS,
        refresh_share: float = 0.5,
        idle_hosts: int = 50_000,
        recall: Recall | None = None,
        robots_agent: str = PRODUCT_TOKEN,
    ) -> None:
        """``resolve``: which hosts are looked up before their first request (None:
        none); ``ip_delay``: the gap between two requests to one address (default:
        ``delay``), on top of each host's own rules; ``idle_hosts``, ``recall``: how
        many hosts with nothing to ask are kept, what a new slot owes (idlehosts.py)."""
        self._delay = delay
        # None: every host waits its fixed delay, whatever its answers (throttle.py).
        self._throttle = throttle
        self._resolve = resolve
        self._slots: dict[str, HostSlot] = {}
        self._tie = itertools.count()
        self._windows = Windows(
            window=window, loader=loader, max_in_memory=max_in_memory, ranked=order.ranked
        )
        self._share = RefreshShare(refresh_share)
        self._due = DueHosts(order, self._share, self._windows, lambda: len(self._slots), self._tie)
        self._addresses = AddressRule(
            delay if ip_delay is None else ip_delay,
            self._due.push,
            lambda slot: self._slots.get(slot.host) is slot,
            self._address,
            throttle,
        )
        self._hops = HopRule(
            self._due.push,
            lambda slot: self._slots.get(slot.host) is slot,
            lambda host: self._slots.get(host),
            lambda host: self.delay_of(s) if (s := self._slots.get(host)) else self._delay,
        )
        self.robots = RobotsRule(
            delay=delay,
            max_crawl_delay=max_crawl_delay,
            retry_base=robots_retry_base,
            attempts=robots_max_attempts,
            ttl=robots_ttl,
        )
        self._budget = max_pages_per_host
        self._agent = robots_agent  # the product token robots.txt groups name
        self.idle_hosts = IdleHosts(idle_hosts)
        self._recall = recall
        self._holds: tuple[Callable[[str], bool], ...] = ()
        self._parked: list[HostSlot] = []
        self.in_flight = 0  # requests and lookups
        self.lookups = 0  # of them, lookups
        self._slowest: SlowestHosts[HostSlot] = SlowestHosts()
        # The proxy found down: nothing before this, then a probe alone; the next wait.
        self._all_held_until, self._proxy_wait, self._probing = -math.inf, _PROXY_WAIT, False

    @classmethod
    def of(
        cls,
        config: CrawlConfig,
        loader: Loader,
        resolve: Callable[[str], bool] | None = None,
        recall: Recall | None = None,
    ) -> Scheduler:
        """The scheduler ``config`` asks for."""
        politeness = config.politeness
        return cls(
            delay=politeness.delay,
            window=config.store.host_window,
            loader=loader,
            max_crawl_delay=politeness.max_crawl_delay,
            robots_retry_base=politeness.robots_retry_base,
            robots_max_attempts=politeness.robots_max_attempts,
            robots_ttl=politeness.robots_ttl,
            max_pages_per_host=config.bounds.max_pages_per_host,
            max_in_memory=config.store.frontier_memory,
            resolve=resolve,
            ip_delay=politeness.ip_delay,
            throttle=ThrottleRules(
                politeness.delay_factor, politeness.max_delay, politeness.backoff_base
            ),
            order=config.bounds.order,
            refresh_share=config.recrawl.share,
            idle_hosts=config.store.idle_hosts,
            recall=recall,
            robots_agent=robots_token(config.fetch.user_agent),
        )

    # -- filling ------------------------------------------------------------
    def _slot(self, host: str) -> HostSlot:
        slot = self._slots.get(host)
        if slot is None:
            slot = self._slots[host] = HostSlot(host, self._delay)
            if self._recall is not None and (owed := self._recall(host)) is not None:
                # A host met before, maybe forgotten: its wait, pages and robots.txt's tries.
                slot.next_allowed, slot.pages, slot.robots_attempts = owed
        return slot

    def add(self, host: str, entry: Entry) -> bool:
        """Queue an admitted entry; False if the host was given up."""
        slot = self._slot(host)
        if slot.robots_state is HostRobots.GIVEN_UP and not self.robots.reopen(slot, entry.url):
            return False
        had_work = slot.has_work
        self._windows.add(slot, entry)
        (self._arm if had_work else self._bring_forward)(slot)
        return True

    def credit(self, host: str, fp: int, amount: float) -> None:
        """Add ``amount`` to a pending entry's score (a ranked order; the shard was
        credited already): an entry in memory moves up at once, one on disk at its
        window's next refill."""
        slot = self._slots.get(host)
        if slot is not None:
            self._windows.credit(slot, fp, amount)

    def rescore(self, scores: dict[int, float]) -> None:
        """New scores for entries in memory (PageRank recomputed; the shard has them)."""
        self._windows.rescore(self._slots.values(), scores)

    def restore(self, host: str, pending: int) -> None:
        """Tell the scheduler a host has ``pending`` entries on disk (at start-up)."""
        slot = self._slot(host)
        had_work = slot.has_work
        slot.on_disk += pending
        (self._arm if had_work else self._bring_forward)(slot)

    def _arm(self, slot: HostSlot) -> None:
        """Into the heap (unless there or in flight) for its ``ready_at``, or idle."""
        if slot.armed or slot.in_flight:
            return
        if (when := slot.ready_at()) is not None:
            self._due.push(slot, when)
        else:
            self.idle_hosts.rest(slot)

    def _bring_forward(self, slot: HostSlot) -> None:
        """Armed, or armed again if it may go sooner than it was armed for (new URLs
        for a host that waited for a page due again, a plan that brought a page
        forward); its old entry goes stale. A host waiting for its address is not
        brought forward by new URLs (:meth:`add`): the address holds it."""
        when = None if slot.in_flight else slot.ready_at()
        if when is not None and (not slot.armed or when < slot.armed_at):
            self._due.push(slot, when)

    def refreshes(self, host: str, due: list[tuple[float, Entry]]) -> None:
        """The host's pages due again, and when (a new plan replaces the last); none
        for a host given up."""
        slot = self._slot(host)
        if slot.robots_state is HostRobots.GIVEN_UP:
            return
        if slot.aside:
            # Due already, set aside with their scheme (backoffs.py): not twice.
            aside = {e.fp for e in slot.aside}
            due = [(at, e) for at, e in due if e.fp not in aside]
        slot.due_anew([(at, next(self._tie), e) for at, e in due])
        self._bring_forward(slot)

    def due_again(self, host: str, at: float, entry: Entry) -> None:
        """One page due again at ``at`` (it was just asked); not for a host given up."""
        slot = self._slot(host)
        if slot.robots_state is HostRobots.GIVEN_UP:
            return
        slot.due_again(at, next(self._tie), entry)
        self._bring_forward(slot)

    # -- dispatching --------------------------------------------------------
    def next_wakeup(self) -> float | None:
        """When the earliest armed host becomes ready, or None if none is (-inf: one
        is ready now, waiting to be chosen under a ranked order)."""
        wake = self._due.next_wakeup()  # a probe's end wakes the crawler
        return None if wake is None or self._probing else max(wake, self._all_held_until)

    def next_job(self, now: float) -> Job | None:
        """The next request that may start at ``now``, if any."""
        if self._all_held_until == -math.inf:
            return self._next_job(now)
        # The proxy was found down: after the wait, one request to see if it is back.
        if now < self._all_held_until or self._probing:
            return None
        job = self._next_job(now)
        self._probing = job is not None and job.kind not in (JobKind.RESOLVE, JobKind.SKIP)
        return job

    def _next_job(self, now: float) -> Job | None:
        while (slot := self._due.next_due(now)) is not None:
            host = slot.host
            if self._slots.get(host) is not slot:
                self._pass(slot)
                continue  # dropped while armed
            if slot.next_allowed > now:
                # Told to wait longer after it was armed (a mark taken over from
                # another peer): back in the heap at the later time.
                self._due.push(slot, slot.next_allowed)
                continue
            if self._held(host):
                # Its previous owner has not handed it over yet: park it.
                self._parked.append(slot)
                self._addresses.set_aside(slot)
                self._hops.set_aside(slot)
                continue
            slot.armed = False
            if slot.backoff is not None and not self._askable(slot, now):
                self._pass(slot)
                self._arm(slot)  # only its backed-off scheme's URLs: back at the end
                continue
            if self._look_up(slot, now):
                # Its address's turn, if it has it, waits for the answer: passed on,
                # the host went to the back of the address's queue, and one whose
                # answer expired within every round of a busy address (thousands of
                # sites on one server, a short TTL) never went. Another address in the
                # answer passes it (AddressRule.resolved), as a failure does.
                self._hops.passed(slot)
                return Job(JobKind.RESOLVE, host, "")
            # The host the request goes to: another when robots.txt was redirected
            # there, which waits for that host's time (its slot made, or made again,
            # with what it owes) and its address's turn (hops.py). The target is
            # looked up first, as for its own first request, if this peer never did
            # or forgot it: else the per-IP rule would not know where the hop lands.
            target = target_of(slot)
            if hop := target != slot.host:
                aim = self._slot(target)
                if (
                    not aim.in_flight
                    and aim.robots_state is not HostRobots.GIVEN_UP
                    and now >= aim.next_allowed
                    # Held (being handed to another peer): nothing may be in flight
                    # for it, or the hand-off could not drop it.
                    and not self._held(target)
                    # With its address's turn, the hop goes on the target's address
                    # as it was (the transport looks the name up again if expired):
                    # the turn would wait for the target's lookup, and its failure.
                    and (aim.address is None or not self._addresses.has_turn(slot))
                    and self._look_up(aim, now)
                ):
                    self._hops.may_start(slot, target, now, address=None)  # waits for it
                    self._addresses.passed(slot)
                    return Job(JobKind.RESOLVE, target, "")
            if not self._hops.may_start(slot, target, now, address=self._address(slot)):
                self._addresses.passed(slot)
                continue
            if not self._addresses.may_start(slot, now, hop=hop):
                continue
            if slot.robots_state is HostRobots.UNKNOWN or self.robots.stale(slot, now):
                fetch = slot.robots_fetch
                if fetch is None or fetch.state is not RobotsState.AWAITING_RESPONSE:
                    first = slot.queue[0].url if slot.queue else self._windows.peek_url(slot)
                    if first is None and slot.refresh:  # only pages due again (a restart)
                        first = slot.first_due().url
                    if first is None:
                        self._pass(slot)
                        self._arm(slot)  # nothing left to ask: idle
                        continue
                    fetch = self._robots_fetch(slot, first, now)
                if fetch is not None:  # None: its other scheme's rules, fresh, were kept
                    self._start_request(slot, target)
                    return Job(JobKind.ROBOTS, host, fetch.url)
            entry = self._share.take(slot, now, self._windows)
            if entry is None:
                self._arm(slot)  # only pages due later: back in the heap for then
                self._pass(slot)
                continue
            if not entry.url.startswith(slot.robots_scheme) and (
                fetch := self._robots_fetch(slot, entry.url, now)
            ):
                self._windows.put_back(slot, entry)  # first, once its scheme's rules come
                self._start_request(slot, target)
                return Job(JobKind.ROBOTS, host, fetch.url)
            assert slot.robots is not None
            reason = None
            fresh = entry.fresh
            if not slot.robots.allowed(entry.url):
                reason = slot.robots.closed_for or "robots"
            elif fresh and self._budget is not None and slot.pages >= self._budget:
                reason = "host page budget"
            if reason is not None:
                # No request was made, so the host's next-allowed time stands.
                self._arm(slot)
                if not slot.armed:  # nothing more to ask
                    self._pass(slot)
                return Job(JobKind.SKIP, host, entry.url, entry, reason)
            if fresh:
                slot.pages += 1
            self._start_request(slot, target)
            kind = JobKind.SITEMAP if is_sitemap(entry.depth) else JobKind.PAGE
            return Job(kind, host, entry.url, entry)
        return None

    def _held(self, host: str) -> bool:
        """Whether a part of the peer holds the host (see :meth:`hold`)."""
        return any(held(host) for held in self._holds)

    def _look_up(self, slot: HostSlot, now: float) -> bool:
        """Whether the host is to be looked up now (its answer unknown or expired);
        if so, its lookup is in flight from now."""
        if self._resolve is None or now < slot.resolved_until or not self._resolve(slot.host):
            return False
        # A place it had in the heap goes stale (a hop's target, due for its own
        # request): popped, it would be looked up a second time. The answer arms it.
        slot.armed = False
        slot.in_flight = True
        self.in_flight += 1
        self.lookups += 1
        return True

    def _start_request(self, slot: HostSlot, target: str) -> None:
        slot.in_flight = True
        self.in_flight += 1
        self._addresses.started(slot)
        self._hops.started(slot, target)

    def _pass(self, slot: HostSlot) -> None:
        """The host makes no request now: a turn it had (address, hop target) passes on."""
        self._addresses.passed(slot)
        self._hops.passed(slot)

    def _address(self, slot: HostSlot) -> str | None:
        """The address the slot's next request goes to, for the per-IP rule: its
        own, or its hop's target's if this peer looked that host up (None: unknown;
        a hop then waits for its target host alone)."""
        target = self._target_slot(slot)
        return None if target is None else target.address

    def _target_slot(self, slot: HostSlot) -> HostSlot | None:
        """The slot of the host the slot's next request goes to: itself, or its
        robots.txt's hop target's if this peer has that host (else None)."""
        target = target_of(slot)
        return slot if target == slot.host else self._slots.get(target)

    # -- completions --------------------------------------------------------
    def finished(
        self, host: str, now: float, *, wait: float | None = None, asked: float | None = None,
        answered: bool = True,
    ) -> None:  # fmt: skip
        """A request to ``host`` ended at ``now``; the next waits the host's delay, or
        ``wait`` (a retry's back-off) or ``asked`` (its Retry-After) if longer. The
        address waits for its server's word (its pace, ``asked``), not a back-off of this
        host's or its Crawl-delay (one site's broken robots.txt holds not the sites beside
        it). ``answered``: the proxy, if any, answered (see abandoned)."""
        slot = self._slots[host]
        slot.in_flight = False
        self.in_flight -= 1
        if answered:
            self._all_held_until, self._proxy_wait = -math.inf, _PROXY_WAIT
        self._probing = False
        held = max(wait or 0.0, asked or 0.0)  # a back-off or Retry-After: the server's
        slot.next_allowed = now + max(self.delay_of(slot), held)
        if held:
            slot.asked_until = max(slot.asked_until, now + held)
        pace, rules = slot.pace, self._throttle
        server = 0.0 if pace is None or rules is None else pace.delay(rules, 0.0)
        self._addresses.ended(slot, now, now + max(server, asked or 0.0))
        self._hops.ended(slot, now)
        self._arm(slot)
        self.idle_hosts.forget(now, self._slots, self._forget, self._hops.awaited)

    def address_free_at(self, address: str) -> float:
        """When ``address`` may next be asked here: its delay, its server's wait."""
        return self._addresses.free_at(address)

    def defer_address(self, address: str, until: float) -> None:
        """No request to ``address`` before ``until``, whichever host asks (a peer
        that holds its lease said so)."""
        self._addresses.defer(address, until)

    def heard(
        self, host: str, latency: float | None, status: int | None, *, asked: float | None = None
    ) -> None:
        """How ``host``'s request was answered (a page, a robots.txt's 503 or 429),
        before it ends: ``latency`` seconds to the head, ``asked``: what its Retry-After
        asked. A hop's answer paces its target, if this peer has that host."""
        slot = self._slots.get(host)
        if slot is None or self._throttle is None:
            return
        if (paced := self._target_slot(slot)) is not None:
            paced.pace = paced.pace or Pace()
            paced.pace.heard(latency, status, asked=asked, rules=self._throttle, floor=paced.delay)
        self._addresses.heard(slot, latency, status, asked)

    def paced(self, host: str) -> HostSlot | None:
        """The slot whose pace ``host``'s request feeds: its own, or its robots.txt's
        hop's target's if this peer has that host."""
        slot = self._slots.get(host)
        return None if slot is None else self._target_slot(slot)

    def asked_of(self, slot: HostSlot, now: float) -> float:
        """The wait from ``now`` that the host's server asked for, apart from --delay:
        its Crawl-delay, raised by its pace, or what is left of a Retry-After or a
        back-off if longer. (A mark that kept --delay too made a mistyped --delay 600
        outlive the restart that fixed it by 10 minutes: QA.)"""
        wait, pace = slot.crawl_delay, slot.pace
        if pace is not None and self._throttle is not None:
            # A 503 or 429 back-off grows from the delay in force, --delay included,
            # and is the server's ask whole (kept without it, a review found it cut).
            wait = self.delay_of(slot) if pace.strikes else pace.delay(self._throttle, wait)
        return max(wait, slot.asked_until - now)

    def delay_of(self, slot: HostSlot) -> float:
        """The host's delay now: its floor (--delay, Crawl-delay), raised by its pace."""
        if slot.pace is None or self._throttle is None:
            return slot.delay
        return slot.pace.delay(self._throttle, slot.delay)

    def abandoned(
        self,
        host: str,
        entry: Entry | None,
        now: float,
        refused: bool = False,
        *,
        proxy_down: bool = False,
    ) -> None:
        """The request for ``entry`` (None: the host's robots.txt) was cut short by
        the crawler, not by the server: it is asked again later, as if never asked,
        and the host waits its delay as after any request. ``refused``: never sent (an
        address's lease refused): a robots.txt redirected elsewhere goes on from there,
        not from the host's own again (a request more to the host each time).

        ``proxy_down``: the proxy could not be reached. No request starts for a while,
        1 s, then one alone, and twice as long each time it finds the proxy down again,
        up to a minute; an answer ends the wait, and a request cut short otherwise (a
        lease refused, a pause) leaves it as it was: it showed nothing of the proxy."""
        if proxy_down and now >= self._all_held_until:  # the first to find it down since a wait
            self._all_held_until = now + self._proxy_wait
            self._proxy_wait = min(2 * self._proxy_wait, _PROXY_WAIT_MAX)
        slot = self._slots[host]
        if entry is None:
            if not refused:
                slot.robots_fetch = None
        else:
            if entry.fresh:
                # Counted against the host's page budget when handed out; it will be
                # again when asked again.
                slot.pages -= 1
            self._windows.put_back(slot, entry)
        self.finished(host, now, answered=False)

    def restore_host(self, host: str, *, not_before: float, pages: int) -> None:
        """What an earlier run left for ``host``: no request before ``not_before``,
        and ``pages`` of its budget already spent."""
        slot = self._slot(host)
        slot.next_allowed = max(slot.next_allowed, not_before)
        slot.pages = max(slot.pages, pages)
        self._arm(slot)  # idle, if it has nothing to ask

    def parse_robots(self, body: bytes) -> RobotsRules:
        """A robots.txt body's rules for this crawler (no state: any thread)."""
        return RobotsRules.parse(body, self._agent)

    # -- ownership ------------------------------------------------------------
    def busy(self, host: str) -> bool:
        return (slot := self._slots.get(host)) is not None and slot.in_flight

    def drop_host(self, host: str) -> bool:
        """Forget a host (handed to another peer); refused while a request is in flight."""
        if (slot := self._slots.get(host)) is not None:
            if slot.in_flight:
                return False
            self._forget(slot)
        return True

    def _forget(self, slot: HostSlot) -> None:
        del self._slots[slot.host]
        self.idle_hosts.drop(slot)
        # A stale heap entry for it is skipped when popped; a turn it has, or a place
        # it has in a queue, passes on now: waiting for its address, it may hold its
        # hop target's turn, and it would not be popped to pass it.
        self._windows.clear(slot)
        self._addresses.set_aside(slot)
        self._hops.set_aside(slot)
        if slot.address is not None:
            # Hops to it waiting for its address wait for the host alone now.
            self._addresses.moved(slot.address)

    def hold(self, held: Callable[[str], bool]) -> None:
        """Hosts for which ``held`` is true get no request until :meth:`release`
        (several parts of a peer may hold hosts, each for reasons of its own)."""
        self._holds = (*self._holds, held)

    def release(self) -> None:
        """Re-examine held hosts (a hand-off finished, a copy was stored); they queue
        up again."""
        parked, self._parked = self._parked, []
        for slot in parked:
            if self._slots.get(slot.host) is slot:
                slot.armed = False
                self._arm(slot)

    # -- introspection ------------------------------------------------------
    @property
    def requests(self) -> int:
        """Requests in flight (lookups aside: QA, "in flight 11" with none at the server)."""
        return self.in_flight - self.lookups

    def idle(self) -> bool:
        """Nothing queued, nothing waiting for its time, nothing in flight."""
        return not self._due and not self._parked and self.in_flight == 0

    @property
    def in_memory(self) -> int:
        """Entries held in memory over all hosts (windows.py)."""
        return self._windows.in_memory

    @property
    def hosts(self) -> int:
        return len(self._slots)

    def slot(self, host: str) -> HostSlot | None:
        return self._slots.get(host)

    def slowest(self, n: int, *, now: float | None = None) -> list[SlowHost]:
        """The ``n`` hosts this peer goes slowest on (longest delay, then latency, time-outs
        counted), walking every host: with ``now``, given again for a while
        (:class:`SlowestHosts`)."""
        return self._slowest.ranked(self._slots.values(), n, self.delay_of, now)
