"""A cluster of peers in one trio process: each on its own host of a
:class:`~ubipy.net.MemoryNetwork`, crawling the synthetic web through the in-process
transport, on whatever clock the test runs (the autojump clock: a minute of crawl and
gossip in a few seconds).

The harness owns every peer's task, each in a cancel scope of its own, and does to
them what the process tests do to processes: start (joining another), stop gracefully
(SIGTERM), kill (kill -9: no leave, nothing more sent or written, what was not
committed lost) and restart over the same data (so with the same id). Each life of a
peer is a :class:`SimPeer`, with the log lines it wrote, as a ``PeerProcess`` has its
stderr: the same log lines judge a ring stable.

Everything the cluster draws at random comes from the seed: the peers' ids (so which
hosts each owns), their membership choices, the network's jitter.
"""

from __future__ import annotations

import contextvars
import json
import logging
import random
import re
import time
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from ubipy.config import (
    BoundsConfig,
    CrawlConfig,
    ForwardingConfig,
    PolitenessConfig,
    ReplicationConfig,
)
from ubipy.fetch import Resolver
from ubipy.net import MemoryNetwork, request
from ubipy.peer import Peer
from ubipy.store import PEER_ID_META, Shard
from ubipy.synthweb import SyntheticWeb, SynthServer, SynthTransport, in_process
from ubipy.wire import StatusRequest, secret_from

SECRET = "s3cret"
# Where the test's own requests (cluster status) come from.
TEST_HOST = "10.0.0.254"
# Loopback-like links: well under a millisecond, a little jitter drawn from the seed so
# that frames on different connections race differently from seed to seed.
LATENCY = 0.0002
JITTER = 0.0003


def host_of(index: int) -> str:
    return f"10.0.0.{index + 1}"


def one_view(peers: Sequence[SimPeer]) -> bool:
    """Every one of ``peers`` sees exactly them alive."""
    everyone = frozenset(p.peer_id for p in peers)
    return all(p.peer.membership.alive_ids() == everyone for p in peers)


def with_peer_id(data: Path, peer_id: str) -> Path:
    """``data`` made a peer's data directory that holds ``peer_id`` (tests that need
    one peer's id to sort before another's); returned."""
    shard = Shard.open(data)
    with shard.transaction():
        shard.set_meta(PEER_ID_META, peer_id)
    shard.close()
    return data


def peer_config(
    data: Path,
    listen: str,
    *,
    join: Sequence[str] = (),
    replicas: int = 1,
    concurrency: int = 4,
    batch_linger: float = 0.2,
    secret: str = SECRET,
    delay: float = 0.01,
    bounds: BoundsConfig | None = None,
) -> CrawlConfig:
    """Every harness peer's configuration: what tests/e2e's ``start_peer`` passes on
    the command line (``--delay 0.01 --robots-retry 0.05 --secret``), the churn tests'
    ``--batch-linger 0.2 --concurrency 4``, and the CLI's defaults for the rest. The one
    place here that knows the config's fields."""
    return CrawlConfig(
        data_dir=data,
        listen=listen,
        join=tuple(join),
        politeness=PolitenessConfig(delay=delay, robots_retry_base=0.05, concurrency=concurrency),
        forwarding=ForwardingConfig(batch_linger=batch_linger),
        replication=ReplicationConfig(replicas=replicas),
        secret=secret,
        bounds=bounds or BoundsConfig(),
    )


# What time.time() says when trio's clock reads 0 (1 January 2026): a constant, so that
# sums of wall times round the same way in every run of a seed.
EPOCH = 1_767_225_600.0


@contextmanager
def wall_clock_on_trio_time() -> Iterator[None]:
    """``time.time()`` that follows trio's clock while the cluster runs.

    Peers stamp politeness marks, frames and pages with the wall clock and schedule with
    trio's; on real machines the two advance together. On the autojump clock they do
    not: trio's stands still while the CPU works and leaps while everyone waits, so a
    host's mark handed to its new owner would owe the wrong wait (the log, on trio's
    clock, would show short gaps no real crawl has). So the wall clock is made to keep
    step: a fixed offset from trio's."""
    real = time.time
    offset = EPOCH

    def on_trio_time() -> float:
        try:
            return offset + trio.current_time()
        except RuntimeError:  # outside trio (a thread, the test's teardown)
            return real()

    time.time = on_trio_time
    try:
        yield
    finally:
        time.time = real


# The peer whose task is running: log records are its (tasks inherit it from the
# peer's own task, as contextvars do).
_CURRENT: contextvars.ContextVar[SimPeer | None] = contextvars.ContextVar(
    "harness_peer", default=None
)


class _PerPeerLog(logging.Handler):
    def emit(self, record: logging.LogRecord) -> None:
        sim = _CURRENT.get()
        if sim is not None:
            sim.logged(record)


@dataclass(eq=False)
class SimPeer:
    """One life of a peer (a restart is a new SimPeer over the same data), with the lines
    it logged; like tests/e2e's ``PeerProcess``."""

    index: int
    host: str
    data: Path
    peer: Peer
    lines: list[str] = field(default_factory=list)
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    ended: trio.Event = field(default_factory=trio.Event)
    # "stopped" once its run returned (a graceful stop), "killed" when killed.
    exit: str | None = None
    troubles: list[str] = field(default_factory=list)  # errors and tracebacks logged
    on_log: Callable[[], None] | None = None
    _grew: trio.Event = field(default_factory=trio.Event)

    @property
    def peer_id(self) -> str:
        return self.peer.peer_id

    @property
    def address(self) -> str:
        return self.peer.address

    def logged(self, record: logging.LogRecord) -> None:
        line = f"{trio.current_time():9.3f} {record.levelname} {record.name}: {record.getMessage()}"
        if record.exc_info:
            line += "\n" + logging.Formatter().formatException(record.exc_info)
        self.lines.append(line)
        if record.levelno >= logging.ERROR or record.exc_info:
            self.troubles.append(line)
        self._grew.set()
        self._grew = trio.Event()
        if self.on_log is not None:
            self.on_log()

    def count(self, pattern: str) -> int:
        regex = re.compile(pattern)
        return sum(len(regex.findall(line)) for line in self.lines)

    async def wait_count(self, pattern: str, n: int) -> None:
        """Wait until ``pattern`` has matched the log ``n`` times."""
        regex = re.compile(pattern)
        seen = found = 0
        while True:
            lines = self.lines
            found += sum(len(regex.findall(line)) for line in lines[seen:])
            seen = len(lines)
            if found >= n:
                return
            await self._grew.wait()


class Cluster:
    """Peers on one MemoryNetwork and one in-process web; see the module docstring."""

    def __init__(self, nursery: trio.Nursery, tmp: Path, web: SyntheticWeb, seed: int) -> None:
        self._nursery = nursery
        self.tmp = tmp
        self.rng = random.Random(seed)
        self.net = MemoryNetwork(
            rng=random.Random(self.rng.getrandbits(64)), latency=LATENCY, jitter=JITTER
        )
        self.server: SynthServer = in_process(web)
        self.lives: list[SimPeer] = []
        self._any_log = trio.Event()
        # Peers that may refuse frames as meant for another peer: a new one on an old
        # one's address, sent to before the others learn of it.
        self.misdirected_allowed: set[str] = set()

    def _logged(self) -> None:
        self._any_log.set()
        self._any_log = trio.Event()

    async def wait_until(self, condition: Callable[[], bool]) -> None:
        """Wait until ``condition()`` holds, looked at whenever any peer logs a line
        (every membership change does)."""
        while not condition():
            await self._any_log.wait()

    @property
    def running(self) -> list[SimPeer]:
        return [p for p in self.lives if not p.ended.is_set()]

    async def start(
        self,
        index: int,
        *,
        join: SimPeer | None = None,
        replicas: int = 1,
        port: int = 0,
        join_addresses: Sequence[str] = (),
        secret: str = SECRET,
        delay: float = 0.01,
        bounds: BoundsConfig | None = None,
        tune: Callable[[CrawlConfig], CrawlConfig] | None = None,
        resolver: Resolver | None = None,
    ) -> SimPeer:
        """Start peer ``index`` on its host over its data directory (a restart when it
        has run before), joining ``join`` and ``join_addresses``, listening on ``port``
        (0: any), with ``bounds`` (scope, filters) if given, its configuration changed by
        ``tune`` and names looked up by ``resolver`` if given; returns once it listens."""
        if any(p.index == index for p in self.running):
            raise ValueError(f"peer {index} is running")
        host = host_of(index)
        self.net.revive(host)  # a host killed before: its new process
        config = peer_config(
            self.tmp / f"p{index}",
            f"{host}:{port}",
            join=[*([join.address] if join is not None else []), *join_addresses],
            replicas=replicas,
            secret=secret,
            delay=delay,
            bounds=bounds,
        )
        if tune is not None:
            config = tune(config)
        peer = Peer(
            config,
            transport=SynthTransport(self.server, client=host),
            network=self.net.node(host),
            rng=random.Random(self.rng.getrandbits(64)),
            resolver=resolver,
            inline_syncs=True,
        )
        sim = SimPeer(index, host, config.data_dir, peer, on_log=self._logged)
        self.lives.append(sim)
        await self._nursery.start(self._life, sim)
        return sim

    async def start_joined(
        self, n: int, *, patience: float = 120.0, **options: Any
    ) -> list[SimPeer]:
        """Peers 0 to ``n - 1``, each joining peer 0, with ``options`` as :meth:`start`
        takes them; returns once every one sees every other alive and is counted in
        the majority's base (a newcomer is, once it has answered a holder's ping and
        asked again: a test that stopped peer 0 at once left the others new for good)."""
        first = await self.start(0, **options)
        sims = [first]
        for i in range(1, n):
            sims.append(await self.start(i, join=first, **options))
        with trio.fail_after(patience):
            await self.wait_until(lambda: one_view(sims))
            await self.wait_until(lambda: not any(p.peer.lease.quorum.pending for p in sims))
        return sims

    async def _life(self, sim: SimPeer, *, task_status: trio.TaskStatus[Peer]) -> None:
        _CURRENT.set(sim)  # this task's context, which the peer's tasks inherit
        try:
            with sim.scope:
                await sim.peer.run(task_status=task_status)
                sim.exit = "stopped"
        finally:
            sim.ended.set()

    async def stop(self, sim: SimPeer, patience: float = 60.0) -> bool:
        """SIGTERM: a graceful stop (leave, hand-off); True if it ended in time."""
        sim.peer.stop()
        with trio.move_on_after(patience):
            await sim.ended.wait()
        return sim.exit == "stopped"

    async def kill(self, sim: SimPeer) -> None:
        """kill -9: at once, no leave; nothing more leaves its host and nothing more is
        written (what was not committed is lost); dials to its host are refused."""
        sim.peer.crawler.crash()
        self.net.kill(sim.host)
        sim.exit = "killed"
        sim.scope.cancel()
        with trio.fail_after(5):
            await sim.ended.wait()

    async def stop_all(self, patience: float = 30.0) -> None:
        """As tests/e2e's ``stop_all``: stop every running peer, kill what is left."""
        running = self.running
        for sim in running:
            sim.peer.stop()
        with trio.move_on_after(patience):
            for sim in running:
                await sim.ended.wait()
        for sim in self.running:
            await self.kill(sim)

    async def status(self, sim: SimPeer, patience: float = 10.0) -> dict[str, Any]:
        """The cluster-wide STATUS answer of ``sim``, asked over the network as the
        command line asks it, as plain JSON."""
        answer = await request(
            sim.address,
            secret_from(SECRET),
            StatusRequest(cluster=True),
            patience=patience,
            network=self.net.node(TEST_HOST),
        )
        payload: dict[str, Any] = json.loads(json.dumps(answer.to_wire()))
        return payload

    def save_logs(self, where: Path) -> None:
        """Every life's log and the server's, to read after a failure."""
        where.mkdir(parents=True, exist_ok=True)
        for i, sim in enumerate(self.lives):
            name = f"{i}-{sim.data.name}-{sim.peer_id}.log"
            (where / name).write_text("\n".join(sim.lines) + "\n", encoding="utf-8")
        self.server.log.to_jsonl(where / "server.jsonl")


@asynccontextmanager
async def cluster(tmp: Path, web: SyntheticWeb, seed: int) -> AsyncIterator[Cluster]:
    """A cluster's world; on the way out, whatever happened, every peer is stopped (those
    that do not stop in time are killed)."""
    logger = logging.getLogger("ubipy")
    level = logger.level
    handler = _PerPeerLog()
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)  # the peers' -v: membership lines judge the ring
    # Under pytest-trio, trio runs the tasks that are ready at once in an order drawn
    # from this generator (its "deterministic scheduling" mode); seeded, a seed's run is
    # closer to a replay (set iteration, hence PYTHONHASHSEED, still varies it).
    scheduler = getattr(trio._core._run, "_r", None)
    if isinstance(scheduler, random.Random):
        scheduler.seed(seed)
    try:
        with wall_clock_on_trio_time():
            async with trio.open_nursery() as nursery:
                c = Cluster(nursery, tmp, web, seed)
                try:
                    yield c
                finally:
                    await c.stop_all()
                nursery.cancel_scope.cancel()
        # Each frame names the peer it is for, and only a frame captured and sent
        # elsewhere is refused for naming another: never one of the cluster's own.
        misdirected = {
            sim.peer_id: n
            for sim in c.lives
            if (n := sim.peer.links.stats.rejected["MISDIRECTED"])
            and sim.peer_id not in c.misdirected_allowed
        }
        assert misdirected == {}, misdirected
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
