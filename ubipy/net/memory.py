"""An in-memory network for tests: many hosts in one trio process, each dialling the
others through :class:`MemoryNetwork` instead of sockets, on whatever clock trio runs
(the autojump clock makes a minute of gossip take milliseconds).

``net.node(host)`` is the :class:`~ubipy.net.network.Network` of one host: what it
serves and dials is addressed HOST:PORT as on TCP (port 0 picks one), and the network
knows who dials whom, so the test controls every pair of hosts:

* per-link latency, jitter (bytes on one connection still arrive in order) and loss,
  both ways or one way
  (a whole ``send_all`` chunk dropped with a probability: the links write one frame
  per call, so framing survives and only frames go missing);
* a buffer per direction (``buffer`` bytes sent and not yet read): a ``send_all``
  puts in what fits and waits for the reader to make room for the rest, so one
  cancelled meanwhile has sent part of its chunk, as on a socket;
* ``partition(*groups)`` and ``heal()``: a connection across the cut breaks at once
  (sends raise ``trio.BrokenResourceError``, the reader gets end of stream) and a
  dial across it goes unanswered until ``syn_timeout`` passes;
* ``kill(host)`` and ``revive(host)``: a host whose process died (kill -9): its
  connections break, dials to it are refused, and nothing it sends leaves it.

Every random choice (loss, jitter) comes from the network's ``rng``, so a seed
replays the same network. Delivery waits are plain trio sleeps and events: nothing
runs in the background, and no task is left behind when a test ends.
"""

from __future__ import annotations

import errno
import math
import operator
import random
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

import trio

from ubipy.net.addresses import split_address
from ubipy.net.network import USER_TIMEOUT_MS, Network, Refuse, StreamHandler, remote_host

# A sender blocks while this many bytes it sent are not yet read, as on a socket whose
# buffers are full: a peer that reads nothing stalls its senders here too.
DEFAULT_BUFFER = 4 * 1024 * 1024
# How long a dial to an unreachable host waits before it fails (a SYN unanswered);
# callers usually give up sooner (the links after 5 s).
DEFAULT_SYN_TIMEOUT = 10.0
_FIRST_PORT = 10_000
# A connection that loses what is sent on it breaks after this long (network.py).
_GIVES_UP = USER_TIMEOUT_MS / 1000
_FIRST_EPHEMERAL = 40_000


@dataclass(frozen=True, slots=True)
class LinkSpec:
    """How bytes travel between two hosts, both ways: one-way ``latency`` plus a
    uniform ``[0, jitter)``, and ``loss``, the chance a ``send_all`` is dropped."""

    latency: float = 0.0
    jitter: float = 0.0
    loss: float = 0.0

    def __post_init__(self) -> None:
        if self.latency < 0 or self.jitter < 0 or not 0 <= self.loss <= 1:
            raise ValueError(f"latency and jitter must be >= 0 and loss in [0, 1]: {self}")


@dataclass(slots=True)
class NetworkStats:
    connections: int = 0
    refused: int = 0
    timed_out: int = 0
    chunks_sent: int = 0
    chunks_dropped: int = 0
    bytes_delivered: int = 0
    broken: int = 0


class _Pipe:
    """One direction of a connection: chunks in flight, each due at a time."""

    def __init__(self, src: str, dst: str) -> None:
        self.src = src
        self.dst = dst
        self.chunks: deque[tuple[float, bytes]] = deque()
        self.buffered = 0
        self.last_due = -math.inf
        # The writer closed: end of stream once everything before it arrived.
        self.eof_due: float | None = None
        # The reader closed: the writer learns it (a reset) at this time; what it
        # sends until then is lost.
        self.reader_gone_at: float | None = None
        # Broken by a partition or a kill: both ends see it at once.
        self.cut = False
        # Cut silently (cut_link's ``silently``) at this time: what is sent is lost,
        # nothing arrives, and the connection breaks once TCP gives up on it.
        self.lost_since: float | None = None
        self._changed = trio.Event()

    def notify(self) -> None:
        self._changed.set()
        self._changed = trio.Event()

    async def changed(self, deadline: float = math.inf) -> None:
        with trio.move_on_at(deadline):
            await self._changed.wait()


def _given_up(pipe: _Pipe, now: float) -> bool:
    """Whether ``pipe`` is broken, by now also when TCP has given up on it."""
    if pipe.lost_since is not None and now >= pipe.lost_since + _GIVES_UP:
        pipe.cut = True
    return pipe.cut


class _Connection:
    """Both directions between a dialler and a listener."""

    def __init__(self, net: MemoryNetwork, client: str, server: str) -> None:
        self.net = net
        self.up = _Pipe(client, server)
        self.down = _Pipe(server, client)
        self.open_ends = 2

    def crosses(self, hosts: Iterable[str]) -> bool:
        return self.up.src in hosts or self.up.dst in hosts

    def lose(self, now: float) -> None:
        for pipe in (self.up, self.down):
            pipe.lost_since = now
            pipe.chunks.clear()
            pipe.buffered = 0
            pipe.notify()

    def cut(self) -> None:
        for pipe in (self.up, self.down):
            pipe.cut = True
            pipe.chunks.clear()
            pipe.buffered = 0
            pipe.notify()

    def end_closed(self) -> None:
        self.open_ends -= 1
        if self.open_ends == 0:
            self.net._connections.pop(self, None)


class MemoryStream(trio.abc.Stream):
    """One end of an in-memory connection."""

    def __init__(self, conn: _Connection, out: _Pipe, into: _Pipe, local: str, remote: str) -> None:
        self._conn = conn
        self._out = out
        self._in = into
        self.local_address = local
        self.remote_address = remote
        self._closed = False
        self._receiving = False
        self._sending = False

    def __repr__(self) -> str:
        return f"<MemoryStream {self.local_address} -> {self.remote_address}>"

    @property
    def _net(self) -> MemoryNetwork:
        return self._conn.net

    def _check_send(self) -> None:
        if self._closed:
            raise trio.ClosedResourceError("this end is closed")
        pipe = self._out
        now = trio.current_time()
        gone = pipe.reader_gone_at
        if _given_up(pipe, now) or (gone is not None and now >= gone):
            raise trio.BrokenResourceError(f"connection to {self.remote_address} broken")

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        self._sending = True
        try:
            self._check_send()
            # First a checkpoint: a cancelled task (a peer being killed) sends nothing.
            await trio.lowlevel.checkpoint()
            net = self._net
            pipe = self._out
            await self._wait_for_room()
            if not data:
                return
            net.stats.chunks_sent += 1
            if pipe.lost_since is not None:
                net.stats.chunks_dropped += 1
                return
            spec = net.link(pipe.src, pipe.dst)
            if spec.loss and net.rng.random() < spec.loss:
                net.stats.chunks_dropped += 1
                return
            jitter = spec.jitter * net.rng.random() if spec.jitter else 0.0
            data = bytes(data)
            sent = 0
            while True:
                if pipe.reader_gone_at is not None:
                    return  # on its way to a closed socket: lost, the reset not yet back
                if pipe.lost_since is not None:
                    return  # cut silently while it waited for room: the rest is lost too
                # What the buffer has room for goes now and the rest waits for the
                # reader, as a socket's send_all does: cancelled meanwhile, it leaves
                # part of the chunk on its way (the links must not write after it).
                piece = data[sent : sent + max(1, net.buffer - pipe.buffered)]
                due = trio.current_time() + spec.latency + jitter
                # Later chunks never overtake earlier ones: a stream is in order.
                due = max(due, pipe.last_due)
                pipe.last_due = due
                pipe.chunks.append((due, piece))
                pipe.buffered += len(piece)
                pipe.notify()
                sent += len(piece)
                if sent == len(data):
                    return
                await self._wait_for_room()
        finally:
            self._sending = False

    async def _wait_for_room(self) -> None:
        """Until the buffer has room (or the connection breaks: raises)."""
        pipe = self._out
        while True:
            self._check_send()
            if pipe.buffered < self._net.buffer:
                return
            await pipe.changed()

    async def wait_send_all_might_not_block(self) -> None:
        if self._sending:
            raise trio.BusyResourceError("another task is sending on this stream")
        self._sending = True
        try:
            await trio.lowlevel.checkpoint()
            pipe = self._out
            while not self._closed and not pipe.cut and pipe.buffered >= self._net.buffer:
                await pipe.changed()
            if self._closed:
                raise trio.ClosedResourceError("this end is closed")
        finally:
            self._sending = False

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        if max_bytes is not None:
            max_bytes = operator.index(max_bytes)
            if max_bytes < 1:
                raise ValueError("max_bytes must be at least 1")
        if self._receiving:
            raise trio.BusyResourceError("another task is receiving on this stream")
        self._receiving = True
        try:
            await trio.lowlevel.checkpoint()
            pipe = self._in
            while True:
                if self._closed:
                    raise trio.ClosedResourceError("this end is closed")
                now = trio.current_time()
                if _given_up(pipe, now):
                    return b""
                if pipe.lost_since is not None:
                    await pipe.changed(pipe.lost_since + _GIVES_UP)
                    continue
                if pipe.chunks and pipe.chunks[0][0] <= now:
                    return self._take(pipe, now, max_bytes)
                if pipe.eof_due is not None and not pipe.chunks and pipe.eof_due <= now:
                    return b""
                if pipe.chunks:
                    due = pipe.chunks[0][0]
                else:
                    due = math.inf if pipe.eof_due is None else pipe.eof_due
                await pipe.changed(due)
        finally:
            self._receiving = False

    def _take(self, pipe: _Pipe, now: float, max_bytes: int | None) -> bytes:
        """Every chunk due by ``now``, up to ``max_bytes``."""
        limit = math.inf if max_bytes is None else max_bytes
        parts: list[bytes] = []
        size = 0
        while pipe.chunks and pipe.chunks[0][0] <= now and size < limit:
            due, chunk = pipe.chunks.popleft()
            room = int(min(limit - size, len(chunk)))
            if room < len(chunk):
                pipe.chunks.appendleft((due, chunk[room:]))
                chunk = chunk[:room]
            parts.append(chunk)
            size += len(chunk)
        pipe.buffered -= size
        self._net.stats.bytes_delivered += size
        pipe.notify()  # a sender may be waiting for room
        return b"".join(parts)

    async def aclose(self) -> None:
        if not self._closed:
            self._closed = True
            now = trio.current_time()
            net = self._net
            out, into = self._out, self._in
            # Over a connection cut silently, neither end of stream nor reset arrives.
            if not out.cut and out.lost_since is None:
                # The end of stream follows the bytes already on their way.
                out.eof_due = max(now + net.link(out.src, out.dst).latency, out.last_due)
            if not into.cut and into.lost_since is None:
                # Unread bytes are gone; the other end learns of the close a trip later.
                into.chunks.clear()
                into.buffered = 0
                into.reader_gone_at = now + net.link(into.src, into.dst).latency
            out.notify()
            into.notify()
            self._conn.end_closed()
        # Closing always succeeds; the checkpoint may still raise Cancelled.
        await trio.lowlevel.checkpoint()


class _Listener:
    def __init__(self, address: str) -> None:
        self.address = address
        self.send, self.receive = trio.open_memory_channel[MemoryStream](math.inf)


class MemoryNetwork:
    """Hosts, listeners and the links between them (see the module docstring)."""

    def __init__(
        self,
        *,
        rng: random.Random | None = None,
        latency: float = 0.0,
        jitter: float = 0.0,
        loss: float = 0.0,
        syn_timeout: float = DEFAULT_SYN_TIMEOUT,
        buffer: int = DEFAULT_BUFFER,
    ) -> None:
        self.rng = rng or random.Random()
        self.default = LinkSpec(latency, jitter, loss)
        self.syn_timeout = syn_timeout
        self.buffer = buffer
        self.stats = NetworkStats()
        self._links: dict[frozenset[str], LinkSpec] = {}
        self._one_way: dict[tuple[str, str], LinkSpec] = {}
        self._listeners: dict[tuple[str, int], _Listener] = {}
        self._next_port: dict[str, int] = {}
        self._next_ephemeral: dict[str, int] = {}
        self._groups: dict[str, int] | None = None
        self._cuts: set[frozenset[str]] = set()  # links cut alone (cut_link)
        self._rejects: set[frozenset[str]] = set()  # of those, the ones refusing dials
        self._dead: set[str] = set()
        # Insertion-ordered (a dict, not a set of objects hashed by address), so that
        # a partition breaks connections in the same order in every run of a seed.
        self._connections: dict[_Connection, None] = {}
        self._names: dict[str, Callable[[str], Sequence[str]]] = {}

    # -- the test's controls -------------------------------------------------------
    def name(self, name: str, hosts: Callable[[str], Sequence[str]]) -> None:
        """A host name: ``hosts(asker)`` is what it resolves to for host ``asker``, in
        order (a dial to the name reaches the first, as TCP's does). Round-robin DNS
        is every host in any order; a load balancer's address, one of them."""
        self._names[name] = hosts

    def resolve(self, asker: str, address: str) -> tuple[str, ...]:
        host, port = split_address(address)
        if host not in self._names:
            return (address,)
        return tuple(f"{h}:{port}" for h in self._names[host](asker)) or (address,)

    def node(self, host: str) -> MemoryNode:
        """The network as seen from ``host``."""
        if not host or ":" in host:
            raise ValueError(f"a host, not an address: {host!r}")
        return MemoryNode(self, host)

    def set_link(
        self,
        a: str,
        b: str,
        *,
        latency: float | None = None,
        jitter: float | None = None,
        loss: float | None = None,
        one_way: bool = False,
    ) -> None:
        """Change the link between hosts ``a`` and ``b`` (both ways, or only from ``a``
        to ``b`` with ``one_way``); what is not given stays as it was. Applies to bytes
        sent from now on."""
        old = self.link(a, b)
        spec = LinkSpec(
            old.latency if latency is None else latency,
            old.jitter if jitter is None else jitter,
            old.loss if loss is None else loss,
        )
        if one_way:
            self._one_way[a, b] = spec
        else:
            self._one_way.pop((a, b), None)
            self._one_way.pop((b, a), None)
            self._links[frozenset((a, b))] = spec

    def link(self, a: str, b: str) -> LinkSpec:
        """How bytes from ``a`` to ``b`` travel."""
        return self._one_way.get((a, b)) or self._links.get(frozenset((a, b)), self.default)

    def partition(self, *groups: Iterable[str]) -> None:
        """Cut the network into ``groups`` of hosts; hosts in no group form one more.
        Connections across a cut break now; dials across it go unanswered."""
        assigned: dict[str, int] = {}
        for i, group in enumerate(groups, start=1):
            for host in group:
                if host in assigned:
                    raise ValueError(f"{host} is in two groups")
                assigned[host] = i
        self._groups = assigned
        for conn in list(self._connections):
            if not self._same_side(conn.up.src, conn.up.dst):
                self._break(conn)

    def cut_link(self, a: str, b: str, *, silently: bool = False, reject: bool = False) -> None:
        """Cut the link between hosts ``a`` and ``b`` alone, both ways: connections
        between them break now, dials between them go unanswered, and every other
        link works (each still reaches the other through a third). ``silently``, as a
        firewall that drops does: the connections stay open, losing all that is sent
        on them, until TCP gives up on them (TCP_USER_TIMEOUT after the cut; a heal
        does not bring them back). ``reject``, as a firewall's REJECT: dials between
        them are refused, as if nothing listened."""
        self._cuts.add(frozenset((a, b)))
        if reject:
            self._rejects.add(frozenset((a, b)))
        now = trio.current_time()
        for conn in list(self._connections):
            # Connections already cut silently stay so: nothing reaches either end.
            if not self._same_side(conn.up.src, conn.up.dst) and conn.up.lost_since is None:
                if silently:
                    conn.lose(now)
                else:
                    self._break(conn)

    def heal(self) -> None:
        """One network again, links cut alone too (connections broken stay broken)."""
        self._groups = None
        self._cuts.clear()
        self._rejects.clear()

    def kill(self, host: str) -> None:
        """The process on ``host`` dies: its connections break, dials to it are
        refused, and it can send nothing until ``revive``. Its listeners stay until
        whoever runs them stops (cancel them: they refuse meanwhile)."""
        self._dead.add(host)
        for conn in list(self._connections):
            if conn.crosses({host}):
                self._break(conn)

    def revive(self, host: str) -> None:
        self._dead.discard(host)

    def stream_pair(self, a: str, b: str) -> tuple[MemoryStream, MemoryStream]:
        """Two connected ends, as if ``a`` had dialled ``b`` (no listener, no time to
        connect): for tests of code that takes a stream."""
        return self._connect(a, f"{b}:{_FIRST_PORT}")

    def reachable(self, a: str, b: str) -> bool:
        """Whether a dial from ``a`` to ``b`` would be answered (by a listener or a
        refusal) rather than lost."""
        return self._same_side(a, b)

    # -- inside ----------------------------------------------------------------------
    def _same_side(self, a: str, b: str) -> bool:
        if frozenset((a, b)) in self._cuts:
            return False
        if self._groups is None or a == b:
            return True
        return self._groups.get(a, 0) == self._groups.get(b, 0)

    def _break(self, conn: _Connection) -> None:
        self.stats.broken += 1
        conn.cut()
        self._connections.pop(conn, None)

    def _bind(self, host: str, port: int) -> _Listener:
        if port == 0:
            port = self._next_port.get(host, _FIRST_PORT)
            while (host, port) in self._listeners:
                port += 1
            self._next_port[host] = port + 1
        elif (host, port) in self._listeners:
            raise OSError(errno.EADDRINUSE, f"{host}:{port} is in use")
        listener = _Listener(f"{host}:{port}")
        self._listeners[(host, port)] = listener
        return listener

    def _unbind(self, listener: _Listener) -> None:
        host, port = split_address(listener.address)
        if self._listeners.get((host, port)) is listener:
            del self._listeners[(host, port)]

    def _connect(self, src: str, address: str) -> tuple[MemoryStream, MemoryStream]:
        """A new connection from ``src`` to ``address``: (dialler's end, listener's end)."""
        ephemeral = self._next_ephemeral.get(src, _FIRST_EPHEMERAL)
        self._next_ephemeral[src] = ephemeral + 1
        local = f"{src}:{ephemeral}"
        conn = _Connection(self, src, split_address(address)[0])
        self._connections[conn] = None
        self.stats.connections += 1
        client = MemoryStream(conn, conn.up, conn.down, local, address)
        server = MemoryStream(conn, conn.down, conn.up, address, local)
        return client, server

    async def _dial(self, src: str, address: str) -> MemoryStream:
        host, port = split_address(self.resolve(src, address)[0])
        address = f"{host}:{port}"
        if src in self._dead:
            raise OSError(errno.ENETUNREACH, f"{src} is down")
        latency = self.link(src, host).latency
        await trio.sleep(latency)  # the SYN on its way
        if frozenset((src, host)) in self._rejects:
            await trio.sleep(latency)  # the firewall's refusal on its way back
            self.stats.refused += 1
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"{address} refused")
        if not self._same_side(src, host):
            # Lost at the cut: nothing comes back, the dialler waits out its SYN timer.
            self.stats.timed_out += 1
            await trio.sleep(self.syn_timeout)
            raise OSError(errno.ETIMEDOUT, f"{address} did not answer")
        listener = self._listeners.get((host, port))
        if listener is None or host in self._dead:
            await trio.sleep(latency)  # the refusal on its way back
            self.stats.refused += 1
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"{address} refused")
        client, server = self._connect(src, listener.address)
        try:
            listener.send.send_nowait(server)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            self._connections.pop(client._conn, None)  # the listener closed meanwhile
            self.stats.refused += 1
            raise ConnectionRefusedError(errno.ECONNREFUSED, f"{address} refused") from None
        try:
            await trio.sleep(latency)  # the SYN-ACK on its way back
        except BaseException:
            await trio.aclose_forcefully(client)
            raise
        return client


class MemoryNode(Network):
    """One host's view of a :class:`MemoryNetwork`."""

    def __init__(self, net: MemoryNetwork, host: str) -> None:
        self.net = net
        self.host = host

    def __repr__(self) -> str:
        return f"<MemoryNode {self.host}>"

    async def serve(
        self,
        address: str,
        handler: StreamHandler,
        *,
        refuse: Refuse | None = None,
        task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        host, port = split_address(address)
        if host != self.host:
            raise OSError(errno.EADDRNOTAVAIL, f"{self.host} cannot listen on {address}")
        listener = self.net._bind(host, port)
        try:
            # Handlers start from this task, not the dialler's: each runs in the
            # context (contextvars) of whoever serves, as a socket server's would.
            async with trio.open_nursery() as nursery:
                task_status.started(listener.address)
                async for stream in listener.receive:
                    if refuse is not None and refuse(remote_host(stream)):
                        await trio.aclose_forcefully(stream)
                        continue
                    nursery.start_soon(handler, stream)
        finally:
            self.net._unbind(listener)
            listener.send.close()
            # Dials that arrived after the last accept are never answered: close them.
            while True:
                try:
                    stream = listener.receive.receive_nowait()
                except (trio.WouldBlock, trio.EndOfChannel):
                    break
                await trio.aclose_forcefully(stream)
            listener.receive.close()

    async def connect(self, address: str) -> trio.abc.Stream:
        return await self.net._dial(self.host, address)

    async def resolve(self, address: str) -> tuple[str, ...]:
        return self.net.resolve(self.host, address)
