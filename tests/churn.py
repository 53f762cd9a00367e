"""The churn scenarios (issue 6), whether their peers run as processes
(tests/e2e/test_churn.py) or in one process on the in-memory network
(tests/cluster/test_churn_memory.py): the web, the timings, the judgments, the
reporting and the five scenarios themselves, written once over a :class:`Scenario`
whose world-specific operations (start, seed, kill, stop, status, the peers' logs) each
world implements, so both are held to the same assertions and print the same figures.

Peers come and go mid-crawl: joins, a graceful leave, kill -9 with and without a
restart, and the whole cluster stopped and started again. The web server's request log
judges each: every page fetched, nothing fetched twice but what a killed peer had in
flight, and politeness kept across owners.

Each scenario prints its figures: the time from the event until every live peer has
logged the membership change (a stable ring, as seen by the test when the log lines
arrive), the URLs and bytes handed off, and for two replicas the extra wire traffic."""

from __future__ import annotations

import re
import sqlite3
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, ClassVar, Generic, Protocol, TypeAlias, TypeVar

import trio

from ubipy.synthweb import Referee, Request, RequestLog, SyntheticWeb, SynthServer, WebSpec

DELAY = 0.01  # what start_peer passes as --delay
SPEC = WebSpec(
    seed=7, hosts=120, pages_per_host=12, latency=0.05, crawl_delay=0.05, cross_link_ratio=0.6
)
# "Mid-crawl": once the server has answered this fraction of the truth.
MID = 1 / 3
RING_PATIENCE = 30.0  # seconds for every live peer to log a membership change
STALL = 20.0  # no request at all for this long and the crawl is not coming back
COVERAGE_LIMIT = 150.0


def stored_urls(data: Path) -> set[str]:
    conn = sqlite3.connect(data / "shard.sqlite3")
    try:
        return {url for (url,) in conn.execute("SELECT url FROM pages")}
    finally:
        conn.close()


def lost_at_kill(
    referee: Referee,
    peer_id: str,
    stored: set[str],
    killed_at: float,
    until: float = float("inf"),
    copy_margin: float = 0.0,
    copies_may_lag: bool = False,
) -> set[str]:
    """The pages a peer killed at ``killed_at`` may have lost, generously: every page
    request of its (first) life, started before ``until``, that was not answered whole,
    or ended less than ``copy_margin`` before the kill, or whose page is not in its
    shard after the kill (served, but the outcome not committed).

    ``copies_may_lag``: its last request to each host as well, whenever it ended. Peers
    that are processes on a loaded machine can commit and copy later than any margin;
    but a host's next request waits for the copy of its last outcome to be acknowledged
    (ubipy/peer/replica.py), so only the last can be unknown to the successor. The
    in-memory world keeps the margin."""
    lost: set[str] = set()
    last: dict[str, Request] = {}
    for r in referee.requests:
        if r.peer != peer_id or r.start >= until or referee.is_robots(r):
            continue
        url = Referee.url_of(r)
        in_shard = url in stored or r.url in stored
        if not r.complete or r.end >= killed_at - copy_margin or not in_shard:
            lost.add(url)
        if r.start < killed_at and (r.host not in last or r.start > last[r.host].start):
            last[r.host] = r
    if copies_may_lag:
        lost.update(Referee.url_of(r) for r in last.values())
    return lost


def pages_after(referee: Referee, since: float) -> Counter[str]:
    return Counter(
        r.peer for r in referee.requests if r.start >= since and not referee.is_robots(r)
    )


def wire_figures(status: dict[str, Any]) -> tuple[int, int | None]:
    """Bytes out on the wire over the live peers, and their replica bytes (None: not
    reported yet)."""
    peers: list[dict[str, Any]] = status.get("peers", [])
    wire = sum(int(p["bytes_out_wire"]) for p in peers)
    if not peers or "replica_bytes" not in peers[0]:
        return wire, None
    return wire, sum(int(p["replica_bytes"]) for p in peers)


def missing_message(missing: Iterable[str], truth: set[str]) -> str:
    gone = sorted(missing)
    return f"{len(gone)} of {len(truth)} pages never fetched, e.g. {gone[:5]}"


_HANDED = re.compile(r"handed off (\d+) hosts \((\d+) URLs, (\d+) bytes\) to (\w+)")
_TOOK = re.compile(r"took over (\d+) hosts \((\d+) URLs\)")


class ChurnPeer(Protocol):
    """One life of a peer, as a scenario sees it (a ``PeerProcess``, a ``SimPeer``)."""

    @property
    def peer_id(self) -> str: ...

    @property
    def data(self) -> Path: ...


P = TypeVar("P", bound=ChurnPeer)
# What a stable ring is: each (peer, log line, how many times, default once).
Expect: TypeAlias = Sequence[tuple[P, str] | tuple[P, str, int]]


def joined(member: ChurnPeer) -> str:
    return f"member {member.peer_id} joined"


def membership(member: ChurnPeer, kind: str) -> str:
    return f"member {member.peer_id} {kind}"


class Scenario(ABC, Generic[P]):
    """One churn scenario's world: the web, its truth, the server and every peer life
    started (a restarted peer is a new life over the old data), and the figures
    reported. The reporting and judging is here; what starts, stops, kills and asks a
    peer is the world's (processes, or peers in this process on the in-memory network)."""

    # A graceful stop's exit, as ``exit_of`` reads it, and the verb that reports it.
    CLEAN_EXIT: ClassVar[object]
    ENDED: ClassVar[str]
    # Whether a commit's copies can lag a killed peer's requests by any time (real
    # processes on a loaded machine), not just the commit interval (``lost_at_kill``).
    COPIES_MAY_LAG: ClassVar[bool]

    def __init__(
        self, name: str, label: str, web: SyntheticWeb, truth: set[str], server: SynthServer
    ) -> None:
        self.name = name
        self.label = label  # what prefixes each reported line
        self.web = web
        self.truth = truth
        self.server = server
        self.figures: list[str] = []
        self.unstable: list[str] = []  # ring changes not seen by all

    @property
    def log(self) -> RequestLog:
        return self.server.log

    # What each world does.

    @abstractmethod
    async def start(self, index: int, *, join: P | None = None, replicas: int = 1) -> P:
        """Start peer ``index`` over its data (a restart when it ran before), joining
        ``join``; returns once it listens."""

    @abstractmethod
    async def seed_crawl(self, peer: P) -> None:
        """Seed the web's seed URL at ``peer``."""

    @abstractmethod
    async def kill_now(self, victim: P) -> None:
        """``kill -9``: at once, no leave; returns once it is gone."""

    @abstractmethod
    def terminate(self, peer: P) -> None:
        """SIGTERM: ask for a graceful stop (leave, hand-off), without waiting."""

    @abstractmethod
    async def wait_ended(self, peer: P) -> None:
        """Wait until the peer has ended (use trio.move_on_after around it)."""

    @abstractmethod
    def exit_of(self, peer: P) -> object:
        """How the peer ended (``CLEAN_EXIT`` for a graceful stop); None if running."""

    @abstractmethod
    def left_line(self, exit: object, after: float) -> str:
        """The report of a leaver that ended with ``exit``, ``after`` s after SIGTERM."""

    @abstractmethod
    async def cluster_status(self, peer: P) -> dict[str, Any]:
        """The cluster-wide STATUS answer of ``peer``, as plain JSON."""

    @abstractmethod
    def count(self, peer: P, pattern: str) -> int:
        """How often the regex ``pattern`` matched the peer's log."""

    @abstractmethod
    async def wait_count(self, peer: P, pattern: str, n: int) -> None:
        """Wait until the regex ``pattern`` has matched the peer's log ``n`` times."""

    @abstractmethod
    def log_texts(self) -> Iterable[str]:
        """The logs of every peer life, in pieces no log line straddles."""

    @abstractmethod
    def diagnose(self) -> None:
        """Peers in trouble: show why, with the end of their log."""

    @abstractmethod
    def assert_no_troubles(self) -> None:
        """No peer logged an error or a traceback."""

    # What every world shares.

    async def cluster(self, n: int, *, replicas: int = 1) -> list[P]:
        """``n`` peers, the others joining the first; returns once all know each other."""
        first = await self.start(0, replicas=replicas)
        peers = [first] + [await self.start(i, join=first, replicas=replicas) for i in range(1, n)]
        await self.ring_stable(
            [(p, joined(q)) for p in peers for q in peers if q is not p], patience=RING_PATIENCE
        )
        return peers

    async def crawling(self, n: int, *, replicas: int = 1) -> list[P]:
        """``n`` peers (see ``cluster``), seeded at the first; returns mid-crawl."""
        peers = await self.cluster(n, replicas=replicas)
        await self.seed_crawl(peers[0])
        await self.mid_crawl()
        return peers

    async def ring_stable(self, expect: Expect[P], *, patience: float) -> float:
        """Wait until each peer has logged its line (``count`` times, default once);
        returns when the last arrived, on trio's clock. Fails naming the peers still
        silent."""
        checks = [(e[0], e[1], e[2] if len(e) == 3 else 1) for e in expect]
        with trio.move_on_after(patience):
            for peer, pattern, count in checks:
                await self.wait_count(peer, re.escape(pattern), count)
            return trio.current_time()
        silent = [
            f"{p.peer_id} ({p.data.name}) lacks {pattern!r} x{count}"
            for p, pattern, count in checks
            if self.count(p, re.escape(pattern)) < count
        ]
        raise AssertionError(f"ring not stable after {patience} s: " + "; ".join(silent))

    async def mid_crawl(self) -> None:
        target = int(len(self.truth) * MID)
        with trio.fail_after(60):
            await self.log.wait_for_count(target)

    async def coverage(self) -> set[str]:
        """Wait until every page of the truth was requested; returns what is missing if
        the crawl stalls (no request for STALL seconds) or runs out of time."""
        missing = set(self.truth)
        seen = 0
        with trio.move_on_after(COVERAGE_LIMIT):
            while True:
                entries = self.log.entries
                for r in entries[seen:]:
                    missing.discard(Referee.url_of(r))
                seen = len(entries)
                if not missing:
                    break
                with trio.move_on_after(STALL) as waiting:
                    await self.log.wait_for_count(seen + 1)
                if waiting.cancelled_caught:
                    break
        return missing

    async def stable(self, expect: Expect[P], *, since: float, what: str) -> float | None:
        """Wait for a stable ring (see ``ring_stable``) and report how long it took after
        ``since``; a ring that never settles is noted (and failed on at the end), so the
        rest of the scenario still runs and reports."""
        try:
            at = await self.ring_stable(expect, patience=RING_PATIENCE)
        except AssertionError as exc:
            self.unstable.append(f"{what}: {exc}")
            self.report(f"{what}: {exc}")
            return None
        self.report(f"{what}: ring stable {at - since:.2f} s after the event")
        return at

    async def status(self, peer: P) -> dict[str, Any] | None:
        """The cluster status asked of ``peer``; None if it cannot answer."""
        try:
            with trio.fail_after(15):
                return await self.cluster_status(peer)
        except (OSError, PermissionError, trio.TooSlowError) as exc:
            self.report(f"no status from {peer.peer_id}: {exc!r}")
            return None

    async def kill(self, victim: P) -> tuple[float, set[str]]:
        """``kill -9`` the victim; returns when, and the pages its shard then holds."""
        killed_at = self.note_event("kill -9")
        await self.kill_now(victim)
        return killed_at, stored_urls(victim.data)

    def report(self, line: str) -> None:
        self.figures.append(line)
        print(f"[{self.label}] {line}", flush=True)

    def note_event(self, what: str) -> float:
        """Report ``what`` happened now, with the crawl's progress; returns the time."""
        now = trio.current_time()
        start = min((r.start for r in self.log), default=now)
        self.report(
            f"{what} at {now:.2f} ({now - start:.2f} s into the crawl, "
            f"{len(self.log)}/{len(self.truth)} requests)"
        )
        return now

    def report_handoffs(self, status: dict[str, Any] | None = None) -> None:
        texts = list(self.log_texts())
        handed = [m for text in texts for m in _HANDED.finditer(text)]
        took = [m for text in texts for m in _TOOK.finditer(text)]
        self.report(
            f"handed off (log): {sum(int(m[1]) for m in handed)} hosts, "
            f"{sum(int(m[2]) for m in handed)} URLs, {sum(int(m[3]) for m in handed)} bytes "
            f"in {len(handed)} hand-offs; took over: {sum(int(m[1]) for m in took)} hosts, "
            f"{sum(int(m[2]) for m in took)} URLs"
        )
        if status is not None:
            peers = status.get("peers", [])
            if peers and "handed_off_urls" in peers[0]:
                urls = sum(int(p.get("handed_off_urls", 0)) for p in peers)
                size = sum(int(p.get("handed_off_bytes", 0)) for p in peers)
                self.report(f"handed off (status of live peers): {urls} URLs, {size} bytes")

    def report_referee(self) -> Referee:
        referee = Referee(self.log, self.web)
        summary = referee.summary(self.truth, DELAY)
        keys = (
            "requests", "truth", "missing", "unexpected", "duplicates", "overlaps",
            "short_gaps", "robots_violations", "incomplete",
        )  # fmt: skip
        self.report(" ".join(f"{k}={summary[k]}" for k in keys))
        if referee.requests:
            first, last = referee.requests[0].start, max(r.end for r in referee.requests)
            self.report(f"crawl from {first:.2f} to {last:.2f} ({last - first:.2f} s)")
        by_peer = Counter(r.peer for r in referee.duplicates())
        if by_peer:
            self.report(f"duplicates by peer {dict(by_peer)}")
            for dup in referee.duplicates()[:5]:
                before = [r for r in self.log if r.url == dup.url and r.start < dup.start]
                self.report(
                    f"  {dup.url} by {dup.peer} at {dup.start:.2f}; before: "
                    + ", ".join(f"{r.peer} at {r.start:.2f} ({r.status})" for r in before)
                )
        return referee

    def report_duplicates(self, duplicates: Sequence[Request], lost: set[str]) -> None:
        beyond = sorted({Referee.url_of(r) for r in duplicates} - lost)
        self.report(
            f"in flight or uncommitted at the kill: {len(lost)} pages; duplicates "
            f"{len(duplicates)}, {len(beyond)} of them for other pages, e.g. {beyond[:3]}"
        )

    def judge(self, referee: Referee, missing: set[str], *, lost: set[str] | None = None) -> None:
        """The verdict every scenario ends with: every page of the truth fetched and
        nothing else; no page fetched twice, or, after a kill, none beyond the pages
        the victim may have ``lost``; the ring stable each time it was waited for; no
        peer in trouble."""
        duplicates = referee.duplicates()
        if lost is not None:
            self.report_duplicates(duplicates, lost)
        assert not missing, missing_message(missing, self.truth)
        assert referee.unexpected(self.truth) == set()
        if lost is None:
            assert duplicates == []
        else:
            assert {Referee.url_of(r) for r in duplicates} <= lost
            assert len(duplicates) <= len(lost)
        assert self.unstable == []
        self.assert_no_troubles()


# A world: given a scenario's name, the context that makes its Scenario and, on the way
# out, whatever happened, checks the peers' logs, stops the peers and keeps the logs.
World: TypeAlias = Callable[[str], AbstractAsyncContextManager[Scenario[P]]]


async def peers_join_mid_crawl_and_take_their_share(world: World[P]) -> None:
    async with world("join") as s:
        old = await s.crawling(2)
        event = s.note_event("newcomers starting")
        new: list[P] = []

        async def newcomer(index: int) -> None:
            new.append(await s.start(index, join=old[0]))

        async with trio.open_nursery() as starting:
            for i in (2, 3):
                starting.start_soon(newcomer, i)
        # The join moment for the newcomers' share: both are up and asking to join.
        joined_at = s.note_event("both newcomers up")
        everyone = old + new
        await s.stable(
            [(p, joined(q)) for p in everyone for q in everyone if q is not p],
            since=event,
            what="2 joins",
        )
        missing = await s.coverage()
        status = await s.status(old[0])

    s.report_handoffs(status)
    referee = s.report_referee()
    after = pages_after(referee, joined_at)
    total_after = sum(after.values())
    s.report(f"pages after the join: {total_after}, by peer {dict(after)}")
    s.judge(referee, missing)
    assert referee.overlaps() == []
    assert referee.short_gaps(DELAY) == []
    assert referee.robots_violations() == []
    # Each newcomer fetches at least half of an even share of what was left.
    fair = total_after / len(everyone)
    for p in new:
        assert after[p.peer_id] >= 0.5 * fair, (p.peer_id, after[p.peer_id], fair)


async def a_peer_leaves_gracefully_mid_crawl(world: World[P]) -> None:
    async with world("leave") as s:
        peers = await s.crawling(4)
        leaver = peers[2]
        stay = [p for p in peers if p is not leaver]
        event = s.note_event("SIGTERM")
        s.terminate(leaver)
        await s.stable([(p, membership(leaver, "left")) for p in stay], since=event, what="leave")
        with trio.move_on_after(60):
            await s.wait_ended(leaver)
        code = s.exit_of(leaver)
        s.report(s.left_line(code, trio.current_time() - event))
        missing = await s.coverage()
        status = await s.status(peers[0])

    s.report_handoffs(status)
    referee = s.report_referee()
    s.judge(referee, missing)
    assert code == s.CLEAN_EXIT


async def a_peer_killed_for_good_with_two_replicas(world: World[P]) -> None:
    async with world("kill, replicas 2") as s:
        peers = await s.crawling(4, replicas=2)
        victim = peers[2]
        stay = [p for p in peers if p is not victim]
        killed_at, stored = await s.kill(victim)
        await s.stable(
            [(p, membership(victim, "dead")) for p in stay], since=killed_at, what="dead"
        )
        missing = await s.coverage()
        status = await s.status(peers[0])

    s.report_handoffs(status)
    if status is not None:
        wire, replica = wire_figures(status)
        extra = "n/a" if replica is None else f"{100 * replica / max(wire - replica, 1):.1f}%"
        s.report(f"wire bytes out (live peers) {wire}, of which replicas {replica}: +{extra}")
    referee = s.report_referee()
    # The copy of a page committed in the last commit before the kill (they come every
    # 50 ms) may not have left yet: its successor fetches it again (README: a kill
    # loses at most the last commit's copies). Two commit intervals cover that one.
    lost = lost_at_kill(
        referee,
        victim.peer_id,
        stored,
        killed_at,
        copy_margin=0.1,
        copies_may_lag=s.COPIES_MAY_LAG,
    )
    s.judge(referee, missing, lost=lost)


async def a_peer_killed_and_restarted_after_10_s(world: World[P]) -> None:
    async with world("kill, restart") as s:
        peers = await s.crawling(4)
        victim = peers[2]
        stay = [p for p in peers if p is not victim]
        killed_at, stored = await s.kill(victim)
        # The one wait of its own: the issue prescribes a 10 s absence (on trio's
        # clock). Meanwhile note when the live peers declare the victim dead, if they
        # do by then.
        declared: list[float | None] = []
        async with trio.open_nursery() as watch:

            async def watch_dead() -> None:
                dead = [(p, membership(victim, "dead")) for p in stay]
                declared.append(await s.stable(dead, since=killed_at, what="dead"))

            watch.start_soon(watch_dead)
            await trio.sleep(10)
            watch.cancel_scope.cancel()
        if not declared:
            s.report("dead: not declared dead by every live peer within the 10 s")
        restarted_at = s.note_event("restart")
        back = await s.start(2, join=peers[0])
        # The others have now seen it join twice; it has seen the three others.
        await s.stable(
            [(p, joined(victim), 2) for p in stay] + [(back, joined(p)) for p in stay],
            since=restarted_at,
            what="rejoin",
        )
        missing = await s.coverage()
        status = await s.status(peers[0])

    _judge_back(s, status, missing, (victim, back), stored, (killed_at, restarted_at))


def _judge_back(
    s: Scenario[P],
    status: dict[str, Any] | None,
    missing: set[str],
    peers: tuple[P, P],
    stored: set[str],
    times: tuple[float, float],
) -> None:
    """A peer killed at ``times[0]`` and back at ``times[1]`` (``peers``: its two
    lives): every page fetched once but what its kill may have lost."""
    victim, back = peers
    s.report_handoffs(status)
    referee = s.report_referee()
    lost = lost_at_kill(referee, victim.peer_id, stored, times[0], until=times[1])
    s.judge(referee, missing, lost=lost)
    assert back.peer_id == victim.peer_id


async def a_newcomer_joins_while_a_killed_peer_is_away(world: World[P]) -> None:
    """A peer killed and back within its grace (30 s), a newcomer joining meanwhile:
    the newcomer heard of the victim only as dead, and fetched its hosts at once,
    pages the victim had fetched (QA: 12 twice); it waits the grace out as the others
    do, and nothing the victim had stored is fetched again."""
    async with world("kill, newcomer, restart") as s:
        peers = await s.crawling(4)
        victim = peers[2]
        stay = [p for p in peers if p is not victim]
        killed_at, stored = await s.kill(victim)
        await s.stable(
            [(p, membership(victim, "dead")) for p in stay], since=killed_at, what="dead"
        )
        joined_at = s.note_event("newcomer")
        newcomer = await s.start(4, join=peers[0])
        await s.stable([(newcomer, joined(p)) for p in stay], since=joined_at, what="join")
        await trio.sleep(max(0.0, killed_at + 10 - trio.current_time()))
        restarted_at = s.note_event("restart")
        back = await s.start(2, join=peers[0])
        everyone = [*stay, newcomer]
        await s.stable([(back, joined(p)) for p in everyone], since=restarted_at, what="rejoin")
        missing = await s.coverage()
        status = await s.status(peers[0])

    _judge_back(s, status, missing, (victim, back), stored, (killed_at, restarted_at))


async def the_whole_cluster_stops_and_restarts(world: World[P]) -> None:
    async with world("restart all") as s:
        peers = await s.crawling(4)
        event = s.note_event("SIGTERM to all")
        for p in peers:
            s.terminate(p)
        with trio.move_on_after(60):
            for p in peers:
                await s.wait_ended(p)
        codes = [s.exit_of(p) for p in peers]
        restarted_at = s.note_event(
            f"all {s.ENDED} {codes} {trio.current_time() - event:.2f} s after SIGTERM; restart"
        )
        first = await s.start(0)
        again = [first] + [await s.start(i, join=first) for i in (1, 2, 3)]
        await s.stable(
            [(p, joined(q)) for p in again for q in again if q is not p],
            since=restarted_at,
            what="restart",
        )
        missing = await s.coverage()
        status = await s.status(first)

    s.report_handoffs(status)
    referee = s.report_referee()
    s.judge(referee, missing)
    assert [p.peer_id for p in again] == [p.peer_id for p in peers]
    assert codes == [s.CLEAN_EXIT] * 4
