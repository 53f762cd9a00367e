"""The churn scenarios of tests/churn.py (issue 6) with the peers as OS processes on
loopback, in real time: the end-to-end check of each scenario (tests/cluster/
test_churn_memory.py runs the same ones in one process, over seeds)."""

from __future__ import annotations

import signal
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio

from tests import churn as scenarios
from tests.churn import SPEC, Scenario
from tests.e2e.cluster import (
    PeerProcess,
    run_cli,
    start_peer_or_fail,
    status_json,
    stop_all,
)
from ubipy.synthweb import SyntheticWeb
from ubipy.synthweb.server import SynthServer, serve
from ubipy.synthweb.truth import ground_truth

SECRET = "s3cret"
# A crawl bound by latency, not by this machine's two cores: 4 requests in flight per
# peer at 50 ms each, so 2 peers take ~10 s over the churn web (SPEC) and an event at a third of
# it leaves newcomers time to start and take their share (a CPU-bound crawl of ~500
# requests/s was nearly over before two newcomers had even started).
CRAWL = ("--batch-linger", "0.2", "--concurrency", "4")


class ProcessScenario(Scenario[PeerProcess]):
    """A scenario's world of peer processes: every process started (a restarted peer is
    a new process with the old data); SIGTERM, kill -9 and exit statuses are real."""

    CLEAN_EXIT = 0
    ENDED = "exited"
    COPIES_MAY_LAG = True

    def __init__(
        self,
        name: str,
        web: SyntheticWeb,
        truth: set[str],
        server: SynthServer,
        nursery: trio.Nursery,
        tmp: Path,
    ) -> None:
        super().__init__(name, name, web, truth, server)
        self.nursery = nursery
        self.tmp = tmp
        self.procs: list[PeerProcess] = []

    async def start(
        self, index: int, *, join: PeerProcess | None = None, replicas: int = 1
    ) -> PeerProcess:
        args = [*CRAWL]
        if replicas != 1:
            args += ["--replicas", str(replicas)]
        if join is not None:
            args += ["--join", join.address]
        p = await start_peer_or_fail(
            self.nursery, self.tmp / f"p{index}", self.server.proxy_url, *args, secret=SECRET
        )
        self.procs.append(p)
        return p

    async def seed_crawl(self, peer: PeerProcess) -> None:
        seeds = self.tmp / "seeds.txt"
        seeds.write_text(self.web.seed_url() + "\n")
        done = await run_cli("seed", str(seeds), "--peer", peer.address, "--secret", SECRET)
        assert done.returncode == 0, done.stderr

    async def kill_now(self, victim: PeerProcess) -> None:
        victim.proc.kill()
        with trio.fail_after(10):
            await victim.proc.wait()

    def terminate(self, peer: PeerProcess) -> None:
        peer.proc.terminate()

    async def wait_ended(self, peer: PeerProcess) -> None:
        await peer.proc.wait()

    def exit_of(self, peer: PeerProcess) -> int | None:
        return peer.proc.returncode

    def left_line(self, exit: object, after: float) -> str:
        return f"the leaver exited {exit} {after:.2f} s after SIGTERM"

    async def cluster_status(self, peer: PeerProcess) -> dict[str, Any]:
        return await status_json(peer.address, SECRET)

    def count(self, peer: PeerProcess, pattern: str) -> int:
        return peer.count(pattern.encode())

    async def wait_count(self, peer: PeerProcess, pattern: str, n: int) -> None:
        await peer.wait_count(pattern.encode(), n)

    def log_texts(self) -> Iterable[str]:
        return (bytes(p.output).decode(errors="replace") for p in self.procs)

    def diagnose(self) -> None:
        """Peers that died on their own, or logged a traceback: show the end of their log."""
        for p in self.procs:
            text = bytes(p.output)
            code = p.proc.returncode
            if b"Traceback" in text or code not in (None, 0, -signal.SIGKILL, -signal.SIGTERM):
                tail = b"\n".join(text.splitlines()[-40:]).decode(errors="replace")
                print(f"[{self.name}] peer {p.peer_id} ({p.data.name}) exit {code}:\n{tail}")

    def assert_no_troubles(self) -> None:
        """No process logged a traceback or an ERROR line (its stderr, as the in-memory
        peers' records of level ERROR or with an exception)."""
        troubles = {
            p.peer_id: lines[:3]
            for p in self.procs
            if (
                lines := [
                    line
                    for line in bytes(p.output).decode(errors="replace").splitlines()
                    if "Traceback" in line or " ERROR " in line
                ]
            )
        }
        assert troubles == {}, troubles

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


@asynccontextmanager
async def churn(name: str, tmp: Path) -> AsyncIterator[Scenario[PeerProcess]]:
    """A scenario's world: the web and its server; on the way out, whatever happened,
    the peers' logs are checked for tracebacks, the peers stopped and the logs kept."""
    web = SyntheticWeb(SPEC)
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        s = ProcessScenario(name, web, ground_truth(web, [web.seed_url()]), server, nursery, tmp)
        try:
            yield s
        finally:
            s.diagnose()
            await s.finish()
        nursery.cancel_scope.cancel()


async def test_peers_join_mid_crawl_and_take_their_share(tmp_path: Path) -> None:
    await scenarios.peers_join_mid_crawl_and_take_their_share(partial(churn, tmp=tmp_path))


async def test_a_peer_leaves_gracefully_mid_crawl(tmp_path: Path) -> None:
    await scenarios.a_peer_leaves_gracefully_mid_crawl(partial(churn, tmp=tmp_path))


async def test_a_peer_killed_for_good_with_two_replicas(tmp_path: Path) -> None:
    await scenarios.a_peer_killed_for_good_with_two_replicas(partial(churn, tmp=tmp_path))


async def test_a_peer_killed_and_restarted_after_10_s(tmp_path: Path) -> None:
    await scenarios.a_peer_killed_and_restarted_after_10_s(partial(churn, tmp=tmp_path))


async def test_the_whole_cluster_stops_and_restarts(tmp_path: Path) -> None:
    await scenarios.the_whole_cluster_stops_and_restarts(partial(churn, tmp=tmp_path))


async def test_a_newcomer_joins_while_a_killed_peer_is_away(tmp_path: Path) -> None:
    await scenarios.a_newcomer_joins_while_a_killed_peer_is_away(partial(churn, tmp=tmp_path))
