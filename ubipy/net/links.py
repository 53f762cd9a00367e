"""Framed, authenticated connections between peers, over any :class:`~ubipy.net.Network`.

Every connection, dialled or accepted, has a reader task that decodes frames with
:mod:`ubipy.wire` and hands each to the peer's handler together with a ``reply`` function
bound to that connection. Outgoing connections are cached per address and re-dialled when
they break. Frames that fail authentication or decoding are dropped and counted; a stream
that cannot be resynchronised is closed. Nothing a remote sends can raise out of here.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from functools import partial

import trio

from ubipy.errors import WireError
from ubipy.net.guard import (
    AUTH_PATIENCE,
    IDLE_TIMEOUT,
    MAX_BAD_FRAMES,
    Accepted,
    SourceLog,
    Strikes,
    default_caps,
)
from ubipy.net.handlers import Handler
from ubipy.net.network import Network, TcpNetwork, endpoint, remote_host
from ubipy.net.relays import Relays, refused_dial
from ubipy.wire import (
    CLOSED,
    FIRST_FRAME_CAP,
    HTTP_ANSWER,
    NEED_DATA,
    REFUSAL,
    Frame,
    FrameReader,
    FrameType,
    FrameWriter,
    Message,
    Rejected,
    RejectReason,
    Relay,
    ReplayGuard,
    decode,
    new_epoch,
)

log = logging.getLogger(__name__)

READ_SIZE = 65_536
# Bytes of a frame that put back a member connection's idle deadline, as a whole frame
# does: a large frame on a slow link goes on, a trickle does not.
_STEADY = 65_536
# How long a forgotten connection waits for the frames being written on it.
_CLOSE_PATIENCE = 1.0
# A frame must be written within this long, plus a second for every _SLOW_LINK bytes
# of it (4 MiB: 52 s): a peer that reads nothing, or one behind a dead path the kernel
# has not noticed yet, must not hold every sender to it behind the send lock. Its
# connection is closed, and the next send dials afresh.
_WRITE_PATIENCE = 20.0
_SLOW_LINK = 128 * 1024


@dataclass(slots=True)
class LinkStats:
    frames_out: Counter[str] = field(default_factory=Counter)
    frames_in: Counter[str] = field(default_factory=Counter)
    bytes_out: int = 0
    bytes_out_by: Counter[str] = field(default_factory=Counter)
    bytes_in: int = 0
    rejected: Counter[str] = field(default_factory=Counter)
    dial_failures: int = 0
    # Accepted connections closed by us, per reason: no authentic frame in time,
    # idle, pushed out by newer unauthenticated ones, refused (full), bad frames.
    cut: Counter[str] = field(default_factory=Counter)


class _Conn:
    def __init__(
        self, stream: trio.abc.Stream, links: Links, address: str = "", source: str = ""
    ) -> None:
        self.stream = stream
        self.links = links
        # Where we dialled; "" for a connection we accepted.
        self.address = address
        # Who is at the other end, for the log: the address dialled, or the host a
        # connection came from.
        self.source = address or source
        # Until a frame authenticates, a connection may make us buffer only a small
        # first frame, for a few seconds: one we accepted may be anyone's, and one we
        # dialled anything at that address (a --join name now another service's). A
        # peer's large first frame goes behind a HELLO, on either.
        self.reader = FrameReader(links.secret, links.guard, first_max_frame=FIRST_FRAME_CAP)
        self.send_lock = trio.Lock()
        self.closed = False
        # A write on it was cut short (cancelled, or it failed): part of a frame may be
        # on the wire, and whatever followed would be read as the rest of it.
        self.broken = False
        # Whether we have sent a frame on it yet (a large first one needs a HELLO).
        self._spoken = False
        self.scope = trio.CancelScope()
        self._cut_for = ""

    async def send(self, message: Message, to: str = "") -> None:
        kind = message.KIND
        links = self.links
        payload = message.to_wire()
        async with self.send_lock:
            if self.broken:
                raise trio.ClosedResourceError("an earlier write on it was cut short")
            # Numbered now, as it is written, not before it waited for the lock: the
            # receiver's replay window spans 1,024 numbers of all our frames, and one
            # numbered early, queued here behind a large frame, could arrive after
            # more than that went on our other connections, to be refused as a
            # replay. (A first frame that needs a HELLO goes one number after it.)
            data = links.writer.frame(kind, payload, time.time(), to=to)
            hello = b"" if self._spoken else links.writer.hello_before(data, time.time(), to=to)
            patience = _WRITE_PATIENCE + (len(hello) + len(data)) / _SLOW_LINK
            try:
                with trio.move_on_after(patience) as writing:
                    if hello:
                        await self.stream.send_all(hello)
                    self._spoken = True
                    await self.stream.send_all(data)
                if writing.cancelled_caught:  # handled below as a cut-short write
                    raise trio.TooSlowError
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                # The connection failed under the write: nothing follows the frame, and
                # its reader reads what came before the end (a refusal) and closes it.
                self._retire()
                raise
            except BaseException as exc:
                # Cut short on a connection that works, or seems to (a caller's
                # time-out, our own): part of the frame may be on the wire, and no
                # later frame may follow it. Closed at once, so the far end does not
                # wait for the rest.
                self._retire()
                await trio.aclose_forcefully(self.stream)
                if isinstance(exc, trio.TooSlowError):
                    raise trio.BrokenResourceError(
                        f"a frame not written within {patience:.0f} s"
                    ) from None
                raise
        stats = links.stats
        stats.frames_out[kind.name] += 1
        stats.bytes_out += len(data)
        stats.bytes_out_by[kind.name] += len(data)

    def _retire(self) -> None:
        """No frame is written on it again."""
        self.broken = self.closed = True
        self.links.drop(self)

    def _cut(self, why: str) -> None:
        self._cut_for = why
        self.links.stats.cut[why] += 1
        self.scope.cancel()

    def note(self, reason: str, detail: str = "", *, always: bool = False) -> None:
        now = trio.current_time()
        line = self.links.source_log.line(self.source, reason, detail, now, always=always)
        if line is not None:
            log.warning("%s", line)

    async def read_loop(self) -> None:
        links = self.links
        accepted = not self.address
        bad_run = 0
        misdirected = False
        moved = 0  # bytes since the idle deadline was last put back
        talked = False  # the other end sent something (on a connection we dialled)
        if accepted:
            self.scope.deadline = trio.current_time() + AUTH_PATIENCE
        try:
            with self.scope:
                while True:
                    event = self.reader.next_event(time.time())
                    if event is NEED_DATA:
                        data = await self.stream.receive_some(READ_SIZE)
                        links.stats.bytes_in += len(data)
                        self.reader.receive_data(bytes(data))
                        moved += len(data)
                        if not accepted and not self.reader.frames and not talked:
                            # A peer may send nothing on a connection we dialled; what
                            # sends something must prove the secret as a stranger must.
                            talked = True
                            self.scope.deadline = trio.current_time() + AUTH_PATIENCE
                        if accepted and self.reader.frames and moved >= _STEADY:
                            # A member's large frame on a slow link, coming steadily.
                            self.scope.deadline = trio.current_time() + IDLE_TIMEOUT
                            moved = 0
                        continue
                    if event is CLOSED:
                        self._closed_by_reader()
                        return
                    if isinstance(event, Rejected):
                        links.stats.rejected[event.reason.name] += 1
                        self.note(event.reason.value, event.detail)
                        if event.reason is RejectReason.BAD_TAG and self.reader.frames == 0:
                            # Nothing authentic yet: the other end has another secret (or
                            # is no peer). Say so at once, and hang up.
                            with trio.move_on_after(_CLOSE_PATIENCE):
                                await self.stream.send_all(REFUSAL)
                            return
                        if event.reason is RejectReason.REFLECTED and not self.address:
                            # Our own frame on a connection we accepted: one of our
                            # dials reached this peer itself (a --join name for it).
                            links.reflected(
                                endpoint(self.stream, "remote"), endpoint(self.stream, "local")
                            )
                        if event.reason is RejectReason.MISDIRECTED:
                            # Authentic, but for another peer: a member whose view of
                            # who is at this address is stale (a new peer on a dead
                            # one's address), or a captured frame replayed. Neither
                            # authenticates the connection; neither counts against the
                            # source (on loopback, every member's). A run of them ends
                            # the connection all the same: each costs a whole frame's
                            # check, and a replayed capture would never end.
                            misdirected = True
                        if event.reason is RejectReason.REPLAY and self.reader.frames:
                            # On a connection that proved the secret, a member's frame
                            # overtaken by more than the window on another connection
                            # (a large frame on a slow link): dropped, as it must be,
                            # but no reason to cut the frames behind it.
                            continue
                    else:
                        assert isinstance(event, Frame)
                        if not accepted and self.reader.frames == 1:
                            self.scope.deadline = math.inf
                        if accepted:
                            if self.reader.frames == 1:
                                links.accepted.authenticated(self)
                                links.strikes.authenticated(self.source)
                            # Idle is measured in frames, or in _STEADY bytes of one: a
                            # byte now and then of a frame that never ends does not hold
                            # the connection.
                            self.scope.deadline = trio.current_time() + IDLE_TIMEOUT
                            moved = 0
                        if self.address:
                            links.trouble.pop(self.address, None)
                            if self.address == links.advertised and event.sender != links.self_id:
                                links.advertised_elsewhere(event.sender)
                        links.stats.frames_in[event.type.name] += 1
                        if event.type is FrameType.HELLO or await links.dispatch(event, self):
                            bad_run = 0
                            continue
                    # A frame rejected, or authentic and of no sense (BAD_PAYLOAD: a
                    # member's flood of them never ended, each reset the run, QA).
                    bad_run += 1
                    if bad_run >= MAX_BAD_FRAMES:
                        self._cut("bad_frames")
                        self.note("cut", f"{bad_run} bad frames in a row")
                        return
            if self.scope.cancelled_caught and not self._cut_for:  # a deadline
                why = "idle" if self.reader.frames else "no_authentic_frame"
                links.stats.cut[why] += 1
                if not self.reader.frames:
                    self.note("cut", f"no authentic frame within {AUTH_PATIENCE:g} s")
                    if self.address:
                        links.note_trouble(
                            self.address,
                            f"it sent nothing authentic within {AUTH_PATIENCE:g} s "
                            "(not a ubipy peer?)",
                        )
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass
        finally:
            self.closed = True
            if accepted:
                links.accepted.closed(self)
                if self.reader.frames:
                    links.strikes.closed(self.source, trio.current_time())
                elif not misdirected and self.source != "?":
                    strikes = links.strikes
                    if strikes.failed(self.source, trio.current_time()):
                        # Once per penalty per source at most, and within the limit
                        # over all sources (a stranger with many addresses).
                        self.note(
                            "barred",
                            f"{strikes.limit} connections without an authentic frame "
                            f"within {strikes.window:g} s; its connections are refused "
                            f"for {strikes.penalty:g} s",
                            always=True,
                        )
            await trio.aclose_forcefully(self.stream)

    def _closed_by_reader(self) -> None:
        links = self.links
        reason = self.reader.close_reason
        if reason is None:
            if self.address and not self.reader.frames:
                links.note_trouble(
                    self.address,
                    "it closed the connection without answering (not a ubipy peer? or one "
                    "that turns this address away for a while: connections from it failed "
                    "to authenticate)",
                )
            return
        links.stats.rejected[reason.name] += 1
        if reason is RejectReason.REFUSED and self.address:
            why = "it refused our frames: the secrets differ"
            if links.trouble.get(self.address) != why:  # once, not at each join try (QA)
                log.warning("%s refused our frames: the secrets differ", self.address)
            links.note_trouble(self.address, why)
            return
        if self.address and not self.reader.frames:
            # An answer read as a frame: "HTTP/1.1 ..." is a frame of 1,213,486,160
            # bytes, which was told as "it answered TOO_LARGE" (QA).
            http = self.reader.close_detail.endswith(HTTP_ANSWER)
            what = "an HTTP server answered" if http else f"its answer read as {reason.value}"
            links.note_trouble(self.address, f"not a ubipy peer ({what})")
        detail = self.reader.close_detail
        if reason is RejectReason.REFUSED and not self.address and not self.reader.frames:
            # Nothing of ours was written on a connection we took: no refusal of it.
            detail = "four zero bytes before a frame (a refusal notice, of nothing sent)"
        self.note(f"closed: {reason.value}", detail)


class Links:
    def __init__(
        self, secret: bytes, self_id: str, handler: Handler, network: Network | None = None
    ) -> None:
        self.secret = secret
        self.network = network or TcpNetwork()
        self.self_id = self_id
        self.writer = FrameWriter(secret, self_id, epoch := new_epoch())
        self.guard = ReplayGuard(local_id=self_id, local_epoch=epoch)
        self._handler = handler
        self._out: dict[str, _Conn] = {}
        self._dialling: dict[str, trio.Lock] = {}
        # Failed dials to each address since one last worked.
        self._dial_failures: dict[str, int] = {}
        self._nursery: trio.Nursery | None = None
        self.stats = LinkStats()
        # Addresses whose last dial failed: nothing is listening there now, whatever
        # membership still believes (a peer that exited before its leave arrived).
        self.unreachable: set[str] = set()
        # Why a dialled address last failed us (no connection, our frames refused, no
        # ubipy), until an authentic frame comes from it.
        self.trouble: dict[str, str] = {}
        # When an authentic frame last came from each peer (by its id), directly or by
        # relay: a leaving peer no longer probes, and hands off only to those it hears.
        self.heard_at: dict[str, float] = {}
        # Addresses we dialled that reached this peer itself, and when (reflected()).
        self.own: dict[str, float] = {}
        # The address this peer gives the others, and what is told when a dial to it
        # reached another peer (its id): a --advertise that is not this peer's own.
        self.advertised: str | None = None
        self.advertised_elsewhere: Callable[[str], None] = lambda peer_id: None
        self._troubled = trio.Event()
        total, unauthenticated = default_caps()
        self.accepted: Accepted[_Conn] = Accepted(total, unauthenticated)
        self.source_log = SourceLog()
        self.strikes = Strikes()
        # The peer id expected at an address, which every frame sent there names, so
        # that a frame captured on its way to one peer is refused by the others
        # (MISDIRECTED); "" (any peer) where none is known yet, as before a join.
        self.recipient_of: Callable[[str], str] = _anyone
        self.relays: Relays[_Conn] = Relays(self)

    async def run(
        self, address: str, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Accept connections on ``address`` until cancelled; reports the bound
        HOST:PORT."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            bound = await nursery.start(
                partial(self.network.serve, refuse=self._barred), address, self._accepted
            )
            task_status.started(bound)

    def _barred(self, source: str) -> bool:
        if self.strikes.barred(source, trio.current_time()):
            self.stats.cut["barred"] += 1
            return True
        return False

    async def _accepted(self, stream: trio.abc.Stream) -> None:
        conn = _Conn(stream, self, source=remote_host(stream))
        keep, evicted = self.accepted.admit(conn, conn.source)
        for old in evicted:
            old._cut("pushed_out")
        if not keep:
            self.stats.cut["full"] += 1
            conn.note("refused", f"{self.accepted.max_total} connections already")
            await trio.aclose_forcefully(stream)
            return
        await conn.read_loop()

    async def dispatch(self, frame: Frame, conn: _Conn, *, via: str = "") -> bool:
        """Hand ``frame`` to the peer (a RELAY to the relays); ``via``: the relay it came
        by, the way its answers go back. False: its payload made no sense (dropped)."""

        async def reply(message: Message) -> None:
            if not conn.closed:
                if via:
                    await self.relays.reply(conn, message, frame.sender, via)
                    return
                try:
                    await conn.send(message, to=frame.sender)
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    conn.closed = True

        self.heard_at[frame.sender] = trio.current_time()
        # Only WireError is bad input: the frame was authentic but its payload made no
        # sense (a buggy peer). Anything else is a bug here and is not hidden.
        try:
            message = decode(frame.type, frame.payload)
            if isinstance(message, Relay):
                await self.relays.received(frame, message, conn)
            else:
                await self._handler(frame, message, reply)
        except WireError as exc:
            self.stats.rejected["BAD_PAYLOAD"] += 1
            # Within the log's limit per remote host, as every dropped frame (QA: a
            # flood of them was 5,000 lines in 0.02 s).
            conn.note("bad_payload", f"a {frame.type.name} frame from {frame.sender}: {exc}")
            return False
        return True

    async def send(self, address: str, message: Message, to: str = "") -> bool:
        """Send one frame to the peer at ``address`` (named ``to``: "", the member
        there); False if it could not be sent. Delivery is not confirmed: what must
        arrive is acknowledged by the receiver and re-sent by the caller."""
        # Only a frame told to another process under our id names us (ReplayGuard).
        named = self.recipient_of(address)
        to = to or ("" if named == self.self_id else named)
        # A member whose address did not answer a dial lately: by relay, at once. Not
        # a frame for another process under our id (a previous life's address): a
        # relay would bring it back here, said as "cannot reach" ourselves (QA).
        mine = to == self.self_id
        relayed = not mine and self.relays.first(address, to)
        conn = None if relayed else await self.connection(address)
        if conn is None:
            # Only a dial that failed: a write that broke, or one given up on a peer
            # that reads nothing, is not the relay's to carry (it would stall there).
            return not mine and await self.relays.send(message, to)
        return await self.send_on(conn, message, to)

    async def send_on(self, conn: _Conn, message: Message, to: str) -> bool:
        """Send one frame on ``conn``; False if it broke (then it is not used again)."""
        try:
            await conn.send(message, to=to)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            conn.closed = True
            # Not whatever is cached now: a connection forgotten while this send
            # waited on it may have been replaced by a healthy one.
            self.drop(conn)
            return False
        return True

    def drop(self, conn: _Conn) -> None:
        """Stop using ``conn`` for sends to its address, if it is still the one used
        (a newer connection may have taken its place)."""
        if conn.address and self._out.get(conn.address) is conn:
            del self._out[conn.address]

    @property
    def nursery(self) -> trio.Nursery | None:
        return self._nursery

    async def connection(self, address: str) -> _Conn | None:
        """The connection to ``address``, dialled if need be; None if it cannot be."""
        conn = self._out.get(address)
        if conn is not None and not conn.closed:
            return conn
        lock = self._dialling.setdefault(address, trio.Lock())
        failures = self._dial_failures.get(address, 0)
        async with lock:
            conn = self._out.get(address)
            if conn is not None and not conn.closed:
                return conn
            if self._dial_failures.get(address, 0) != failures:
                # The dial this send waited for failed: so does the send, at once,
                # not after a dial of its own (sends to an address that answers
                # nothing queued here, each to wait out its 5 s in turn).
                return None
            try:
                with trio.fail_after(5):
                    stream = await self.network.connect(address)
            except (OSError, ValueError, trio.TooSlowError) as exc:
                self._dial_failures[address] = failures + 1
                self.stats.dial_failures += 1
                self.unreachable.add(address)
                self.note_trouble(address, f"cannot connect: {_dial_failure(exc)}")
                self.relays.dial_failed(address, exc)
                log.debug("cannot reach %s: %s", address, exc)
                return None
            self.unreachable.discard(address)
            self._dial_failures.pop(address, None)
            self.relays.dialled(address)
            conn = _Conn(stream, self, address)
            self._out[address] = conn
            assert self._nursery is not None
            self._nursery.start_soon(conn.read_loop)
            return conn

    def why(self, address: str) -> str | None:
        """Why ``address`` has not answered us, as far as known (None: nothing known)."""
        if address in self.trouble:
            return self.trouble[address]
        conn = self._out.get(address)
        if conn is not None and not conn.closed and not conn.reader.frames:
            # A ubipy peer answers a join at once, authentic or with a refusal, unless
            # its loop is held (QA: a peer held by a hostile page was named a stranger).
            return "it took the connection but answers nothing (not a ubipy peer, or a busy one?)"
        return None

    def reflected(self, source: str | None, here: str | None) -> None:
        """A frame of ours came back on a connection from ``source`` to ``here``: the
        address we dialled from there to here reached this peer itself, this time (a
        name can stand for several peers, this one among them: round-robin DNS, a
        Kubernetes service; the connection, never authenticated here, is closed within
        seconds, and the next dial may reach another). Both ends are matched: one
        local port can serve dials to several destinations."""
        if source is None or here is None:
            return
        for address, conn in list(self._out.items()):
            ends = endpoint(conn.stream, "local"), endpoint(conn.stream, "remote")
            if ends == (source, here):
                self.own[address] = trio.current_time()
                self.note_trouble(address, "it reached this peer itself")

    def note_trouble(self, address: str, why: str) -> None:
        self.trouble[address] = why
        self._troubled.set()
        self._troubled = trio.Event()

    async def wait_for_trouble(self, address: str) -> str:
        """Wait until ``address`` has failed us (see ``trouble``); returns why."""
        while address not in self.trouble:
            await self._troubled.wait()
        return self.trouble[address]

    def unreached(self, addresses: Iterable[str]) -> None:
        """Membership's probes of the members at ``addresses`` were answered only
        through others: a connection to one may look open and lose all that is written
        on it (a link cut by a firewall that drops, a route lost: TCP gives up on it
        only after TCP_USER_TIMEOUT, a minute). It is closed; frames go by relay while
        the address is dialled again (see :meth:`Relays.path_lost`), also when dials
        there are refused (a firewall's REJECT: :meth:`Relays.reached_indirectly`).
        Not one with a frame being written: a ping behind a large frame (a hand-off's,
        up to 4 MiB) is late on a healthy link, and a write has its own time-out."""
        for address in addresses:
            self.relays.reached_indirectly(address)
            conn = self._out.get(address)
            if conn is None or conn.send_lock.locked():
                continue
            del self._out[address]
            conn.closed = True
            self.relays.path_lost(address)
            log.info("%s answers only through others: its connection is closed", address)
            if self._nursery is not None:
                self._nursery.start_soon(_close_after_sends, conn)

    def forget(self, address: str) -> None:
        """Drop the cached connection to a peer that left or died (the next send
        dials afresh)."""
        self._dial_failures.pop(address, None)
        self.relays.forget(address)
        conn = self._out.pop(address, None)
        if conn is not None:
            conn.closed = True
            if self._nursery is not None:
                self._nursery.start_soon(_close_after_sends, conn)


def _dial_failure(exc: BaseException) -> str:
    """Why a dial failed, in words: "TooSlowError" was said as it was (QA)."""
    if isinstance(exc, trio.TooSlowError):
        return "no answer to the connection within 5 s (a firewall that drops?)"
    if refused_dial(exc):
        return "connection refused (nothing listens on that port)"
    return str(exc) or type(exc).__name__


def _anyone(address: str) -> str:
    return ""


async def _close_after_sends(conn: _Conn) -> None:
    # Frames already on their way go first: when two peers leave at once, each
    # forgets the other as its own leave is being written to it, and closing under
    # that send would lose the leave (the other then waits for a peer that is gone).
    # A send stuck on a peer that reads nothing is cut short, as before.
    with trio.move_on_after(_CLOSE_PATIENCE):
        async with conn.send_lock:
            await trio.aclose_forcefully(conn.stream)
            return
    await trio.aclose_forcefully(conn.stream)
