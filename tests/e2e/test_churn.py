"""Peers come and go mid-crawl (issue 6): joins, a graceful leave, kill -9 with and
without a restart, and the whole cluster stopped and started again. The web server's
request log judges each: every page fetched, nothing fetched twice but what a killed
peer had in flight, and politeness kept across owners.

Each scenario prints its figures: the time from the event until every live peer has
logged the membership change (a stable ring, as seen by this process when the log
lines arrive), the URLs and bytes handed off, and for ``--replicas 2`` the extra wire
traffic."""

from __future__ import annotations

import re
import signal
from collections import Counter
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from tests.churn import (
    COVERAGE_LIMIT,
    DELAY,
    MID,
    RING_PATIENCE,
    SPEC,
    STALL,
    lost_at_kill,
    missing_message,
    pages_after,
    stored_urls,
    wire_figures,
)
from tests.e2e.cluster import (
    PeerProcess,
    run_cli,
    start_peer_or_fail,
    status_json,
    stop_all,
)
from ubipy.synthweb import SyntheticWeb
from ubipy.synthweb.log import Request, RequestLog
from ubipy.synthweb.referee import Referee
from ubipy.synthweb.server import SynthServer, serve
from ubipy.synthweb.truth import ground_truth

SECRET = "s3cret"
# A crawl bound by latency, not by this machine's two cores: 4 requests in flight per
# peer at 50 ms each, so 2 peers take ~10 s over the churn web (SPEC) and an event at a third of
# it leaves newcomers time to start and take their share (a CPU-bound crawl of ~500
# requests/s was nearly over before two newcomers had even started).
CRAWL = ("--batch-linger", "0.2", "--concurrency", "4")
_HANDED = re.compile(rb"handed off (\d+) hosts \((\d+) URLs, (\d+) bytes\) to (\w+)")
_TOOK = re.compile(rb"took over (\d+) hosts \((\d+) URLs\)")


@dataclass
class Scenario:
    """One churn scenario's world: the web, its truth, the server and every peer
    process started (a restarted peer is a new process with the old data)."""

    name: str
    web: SyntheticWeb
    truth: set[str]
    server: SynthServer
    nursery: trio.Nursery
    tmp: Path
    procs: list[PeerProcess] = field(default_factory=list)
    figures: list[str] = field(default_factory=list)
    unstable: list[str] = field(default_factory=list)  # ring changes not seen by all

    @property
    def log(self) -> RequestLog:
        return self.server.log

    async def start(self, index: int, *extra: str, join: PeerProcess | None = None) -> PeerProcess:
        args = [*CRAWL, *extra]
        if join is not None:
            args += ["--join", join.address]
        p = await start_peer_or_fail(
            self.nursery, self.tmp / f"p{index}", self.server.proxy_url, *args, secret=SECRET
        )
        self.procs.append(p)
        return p

    async def cluster(self, n: int, *extra: str) -> list[PeerProcess]:
        """``n`` peers, the others joining the first; returns once all know each other."""
        first = await self.start(0, *extra)
        peers = [first] + [await self.start(i, *extra, join=first) for i in range(1, n)]
        await ring_stable(
            [(p, joined(q)) for p in peers for q in peers if q is not p], patience=RING_PATIENCE
        )
        return peers

    async def seed(self, peer: PeerProcess) -> None:
        seeds = self.tmp / "seeds.txt"
        seeds.write_text(self.web.seed_url() + "\n")
        done = await run_cli("seed", str(seeds), "--peer", peer.address, "--secret", SECRET)
        assert done.returncode == 0, done.stderr

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

    async def stable(
        self,
        expect: Sequence[tuple[PeerProcess, bytes] | tuple[PeerProcess, bytes, int]],
        *,
        since: float,
        what: str,
    ) -> float | None:
        """Wait for a stable ring (see ``ring_stable``) and report how long it took after
        ``since``; a ring that never settles is noted (and failed on at the end), so the
        rest of the scenario still runs and reports."""
        try:
            at = await ring_stable(expect, patience=RING_PATIENCE)
        except AssertionError as exc:
            self.unstable.append(f"{what}: {exc}")
            self.report(f"{what}: {exc}")
            return None
        self.report(f"{what}: ring stable {at - since:.2f} s after the event")
        return at

    async def status(self, peer: PeerProcess) -> dict[str, Any] | None:
        """The cluster status asked of ``peer``; None if it cannot answer."""
        try:
            with trio.fail_after(15):
                return await status_json(peer.address, SECRET)
        except (OSError, PermissionError, trio.TooSlowError) as exc:
            self.report(f"no status from {peer.peer_id}: {exc!r}")
            return None

    async def finish(self) -> None:
        await stop_all(self.procs)
        with trio.fail_after(10):
            await self.server.wait_idle()
        # Every peer's log and the server's, to read after a failure.
        logs = self.tmp / "logs"
        logs.mkdir(exist_ok=True)
        for i, p in enumerate(self.procs):
            (logs / f"{i}-{p.data.name}-{p.peer_id}.log").write_bytes(bytes(p.output))
        self.log.to_jsonl(logs / "server.jsonl")
        self.report(f"logs in {logs}")

    def report(self, line: str) -> None:
        self.figures.append(line)
        print(f"[{self.name}] {line}", flush=True)

    def report_handoffs(self, status: dict[str, Any] | None = None) -> None:
        handed = [m for p in self.procs for m in _HANDED.finditer(p.output)]
        took = [m for p in self.procs for m in _TOOK.finditer(p.output)]
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

    async def kill(self, victim: PeerProcess) -> tuple[float, set[str]]:
        """``kill -9`` the victim; returns when, and the pages its shard then holds."""
        killed_at = self.note_event("kill -9")
        victim.proc.kill()
        with trio.fail_after(10):
            await victim.proc.wait()
        return killed_at, stored_urls(victim.data)

    def note_event(self, what: str) -> float:
        """Report ``what`` happened now, with the crawl's progress; returns the time."""
        now = trio.current_time()
        start = min((r.start for r in self.log), default=now)
        self.report(
            f"{what} at {now:.2f} ({now - start:.2f} s into the crawl, "
            f"{len(self.log)}/{len(self.truth)} requests)"
        )
        return now

    def diagnose(self) -> None:
        """Peers that died on their own, or logged a traceback: show the end of their log."""
        for p in self.procs:
            text = bytes(p.output)
            code = p.proc.returncode
            if b"Traceback" in text or code not in (None, 0, -signal.SIGKILL, -signal.SIGTERM):
                tail = b"\n".join(text.splitlines()[-40:]).decode(errors="replace")
                print(f"[{self.name}] peer {p.peer_id} ({p.data.name}) exit {code}:\n{tail}")


def joined(member: PeerProcess) -> bytes:
    return b"member " + member.peer_id.encode() + b" joined"


def membership(member: PeerProcess, kind: str) -> bytes:
    return b"member " + member.peer_id.encode() + b" " + kind.encode()


async def ring_stable(
    expect: Sequence[tuple[PeerProcess, bytes] | tuple[PeerProcess, bytes, int]],
    *,
    patience: float,
) -> float:
    """Wait until each peer has logged its line (``count`` times, default once); returns
    when the last arrived, on trio's clock. Fails naming the peers still silent."""
    checks = [(e[0], e[1], e[2] if len(e) == 3 else 1) for e in expect]
    with trio.move_on_after(patience):
        for peer, pattern, count in checks:
            await peer.wait_count(re.escape(pattern), count)
        return trio.current_time()
    silent = [
        f"{p.peer_id} ({p.data.name}) lacks {pattern.decode()!r} x{count}"
        for p, pattern, count in checks
        if p.count(re.escape(pattern)) < count
    ]
    raise AssertionError(f"ring not stable after {patience} s: " + "; ".join(silent))


@asynccontextmanager
async def churn(name: str, tmp: Path) -> AsyncIterator[Scenario]:
    """A scenario's world: the web and its server; on the way out, whatever happened,
    the peers' logs are checked for tracebacks, the peers stopped and the logs kept."""
    web = SyntheticWeb(SPEC)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        s = Scenario(name, web, ground_truth(web, [web.seed_url()]), server, nursery, tmp)
        try:
            yield s
        finally:
            s.diagnose()
            await s.finish()
        nursery.cancel_scope.cancel()


async def test_peers_join_mid_crawl_and_take_their_share(tmp_path: Path) -> None:
    async with churn("join", tmp_path) as s:
        old = await s.cluster(2)
        await s.seed(old[0])
        await s.mid_crawl()
        event = s.note_event("newcomers starting")
        new: list[PeerProcess] = []

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
    assert not missing, missing_message(missing, s.truth)
    assert referee.unexpected(s.truth) == set()
    assert referee.duplicates() == []
    assert referee.overlaps() == []
    assert referee.short_gaps(DELAY) == []
    assert referee.robots_violations() == []
    # Each newcomer fetches at least half of an even share of what was left.
    fair = total_after / len(everyone)
    for p in new:
        assert after[p.peer_id] >= 0.5 * fair, (p.peer_id, after[p.peer_id], fair)
    assert s.unstable == []


async def test_a_peer_leaves_gracefully_mid_crawl(tmp_path: Path) -> None:
    async with churn("leave", tmp_path) as s:
        peers = await s.cluster(4)
        await s.seed(peers[0])
        await s.mid_crawl()
        leaver = peers[2]
        stay = [p for p in peers if p is not leaver]
        event = s.note_event("SIGTERM")
        leaver.proc.terminate()
        await s.stable([(p, membership(leaver, "left")) for p in stay], since=event, what="leave")
        code: int | None = None
        with trio.move_on_after(60):
            code = await leaver.proc.wait()
        s.report(f"the leaver exited {code} {trio.current_time() - event:.2f} s after SIGTERM")
        missing = await s.coverage()
        status = await s.status(peers[0])

    s.report_handoffs(status)
    referee = s.report_referee()
    assert not missing, missing_message(missing, s.truth)
    assert referee.unexpected(s.truth) == set()
    assert referee.duplicates() == []
    assert code == 0
    assert s.unstable == []


async def test_a_peer_killed_for_good_with_two_replicas(tmp_path: Path) -> None:
    replicas = ("--replicas", "2")
    async with churn("kill, replicas 2", tmp_path) as s:
        peers = await s.cluster(4, *replicas)
        await s.seed(peers[0])
        await s.mid_crawl()
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
    lost = lost_at_kill(referee, victim.peer_id, stored, killed_at, copy_margin=0.1)
    duplicates = referee.duplicates()
    s.report_duplicates(duplicates, lost)
    assert not missing, missing_message(missing, s.truth)
    assert referee.unexpected(s.truth) == set()
    assert len(duplicates) <= len(lost)
    assert s.unstable == []


async def test_a_peer_killed_and_restarted_after_10_s(tmp_path: Path) -> None:
    async with churn("kill, restart", tmp_path) as s:
        peers = await s.cluster(4)
        await s.seed(peers[0])
        await s.mid_crawl()
        victim = peers[2]
        stay = [p for p in peers if p is not victim]
        killed_at, stored = await s.kill(victim)
        # The one wall-clock wait: the issue prescribes a 10 s absence. Meanwhile
        # note when the live peers declare the victim dead, if they do by then.
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

    s.report_handoffs(status)
    referee = s.report_referee()
    lost = lost_at_kill(referee, victim.peer_id, stored, killed_at, until=restarted_at)
    duplicates = referee.duplicates()
    s.report_duplicates(duplicates, lost)
    assert back.peer_id == victim.peer_id
    assert not missing, missing_message(missing, s.truth)
    assert referee.unexpected(s.truth) == set()
    assert len(duplicates) <= len(lost)
    assert s.unstable == []


async def test_the_whole_cluster_stops_and_restarts(tmp_path: Path) -> None:
    async with churn("restart all", tmp_path) as s:
        peers = await s.cluster(4)
        await s.seed(peers[0])
        await s.mid_crawl()
        event = s.note_event("SIGTERM to all")
        for p in peers:
            p.proc.terminate()
        codes: list[int | None] = []
        with trio.move_on_after(60):
            for p in peers:
                await p.proc.wait()
        codes = [p.proc.returncode for p in peers]
        restarted_at = s.note_event(
            f"all exited {codes} {trio.current_time() - event:.2f} s after SIGTERM; restart"
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
    assert not missing, missing_message(missing, s.truth)
    assert referee.unexpected(s.truth) == set()
    assert referee.duplicates() == []
    assert [p.peer_id for p in again] == [p.peer_id for p in peers]
    assert codes == [0, 0, 0, 0]
    assert s.unstable == []
