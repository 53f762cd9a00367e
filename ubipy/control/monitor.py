"""The control peer's side of monitoring: it tells every member to push figures
here, keeps the latest figures of each, and answers the control server as its
:class:`~ubipy.control.server.ControlBackend`.

A peer's own side (pushing its figures to whoever asked, obeying a STOP) is the
peer's, in :mod:`ubipy.peer`: a peer runs without this module. The control peer is
not in the crawl's path: if it is down, the pushes fail quietly and the crawl goes
on. A live member whose figures stop coming is asked again (see
:meth:`Monitor.ask_again`). A stop from the dashboard reaches every member as a STOP
frame, authenticated like every other frame. The monitor sees its peer through
:class:`ControlledPeer`.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Final, Protocol, TypeVar

import trio

from ubipy.control.server import ControlLimits, serve_control
from ubipy.membership import LIVE_STATES, Member
from ubipy.wire import Control, Figures, Message, SeedAck, Stop

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
Reply = Callable[[Message], Awaitable[None]]

# A live member whose figures have not come for this long is asked for them again, and
# no member is asked more often. Figures come about once a second, and the dashboard
# calls them stale after 5 s.
ASK_AGAIN_AFTER: Final = 5.0


class MemberView(Protocol):
    def members(self) -> Sequence[Member]: ...


class PeerFigures(Protocol):
    def as_json(self) -> dict[str, Any]: ...


class ControlledPeer(Protocol):
    """What the control centre needs of a running peer."""

    @property
    def peer_id(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def membership(self) -> MemberView: ...

    def status(self) -> PeerFigures: ...

    async def seed(self, urls: Sequence[str]) -> SeedAck: ...

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None: ...

    def stop(self) -> None: ...

    async def send(self, address: str, message: Message) -> bool: ...

    def handle(self, kind: type[M], handler: Callable[[str, M, Reply], Awaitable[None]]) -> None:
        """Route frames carrying ``kind`` to ``handler(sender id, message, reply)``."""
        ...

    def on_member_joined(self, callback: Callable[[str], None]) -> None:
        """Call ``callback(address)`` for every member that joins from now on."""
        ...


class Monitor:
    """On the control peer: the figures every member pushed, the members told to
    push them, and the peer's answers to the control server."""

    def __init__(self, peer: ControlledPeer) -> None:
        self._peer = peer
        # The latest figures each member pushed.
        self._figures: dict[str, dict[str, Any]] = {}
        # When each member's figures last came, and when it was last asked for them.
        self._heard: dict[str, float] = {}
        self._asked: dict[str, float] = {}
        self.control_address: str | None = None

    def attach(self, control_address: str) -> None:
        """Start gathering: every member, known now or joining later, is told to push
        its figures to this peer."""
        self.control_address = control_address
        self._peer.handle(Figures, self._on_figures_frame)
        self._peer.on_member_joined(self.member_joined)
        for m in self._peer.membership.members():
            if m.id != self._peer.peer_id and m.state in LIVE_STATES:
                self._ask(m)

    # -- ControlBackend ---------------------------------------------------------
    @property
    def secret(self) -> bytes:
        return self._peer.secret

    def cluster_view(self) -> Mapping[str, Mapping[str, Any]]:
        peer = self._peer
        view: dict[str, dict[str, Any]] = {}
        for m in peer.membership.members():
            if m.id == peer.peer_id:
                entry = peer.status().as_json()
            else:
                # A dead peer keeps its last figures: its row shows what it had done.
                entry = dict(self._figures.get(m.id, {}))
            entry["address"] = m.address
            entry["state"] = m.state.name.lower()
            view[m.id] = entry
        return view

    async def seed(self, urls: list[str]) -> Mapping[str, Any]:
        return (await self._peer.seed(urls)).to_wire()

    def stop_cluster(self) -> None:
        self._peer.start_soon(self._stop_cluster)

    async def _stop_cluster(self) -> None:
        peer = self._peer
        log.warning("stop of the whole cluster asked from the control centre")
        with trio.move_on_after(5.0):
            async with trio.open_nursery() as nursery:
                for m in peer.membership.members():
                    if m.id != peer.peer_id and m.state in LIVE_STATES:
                        nursery.start_soon(peer.send, m.address, Stop())
        peer.stop()

    # -- membership -----------------------------------------------------------------
    def member_joined(self, address: str) -> None:
        """Tell a member this peer learns of to push its figures here."""
        if self.control_address is None:
            return
        for m in self._peer.membership.members():
            if m.address == address and m.id != self._peer.peer_id:
                self._ask(m)
                return
        self._send_control(address)  # not in the view yet: asked, not timed

    def ask_again(self) -> None:
        """Ask again every live member whose figures have not come for ASK_AGAIN_AFTER,
        at most once in that time each.

        A member forgets a control peer it sees dead. When the two were cut off, the
        control peer may only have suspected the member, which comes back as a refuted
        suspicion, not a join, so no join asks it again (found by a review); and a
        CONTROL lost on the way is not sent again either.
        """
        if self.control_address is None:
            return
        now = trio.current_time()
        members = {m.id: m for m in self._peer.membership.members() if m.id != self._peer.peer_id}
        for gone in (self._heard.keys() | self._asked.keys()) - members.keys():
            self._heard.pop(gone, None)
            self._asked.pop(gone, None)
        for m in members.values():
            if m.state not in LIVE_STATES:
                continue
            last = max(self._heard.get(m.id, -math.inf), self._asked.get(m.id, -math.inf))
            if now - last >= ASK_AGAIN_AFTER:
                self._ask(m)

    async def ask_again_forever(self) -> None:
        # Looked at each second, not each ASK_AGAIN_AFTER: a member asked just before
        # it could hear this peer (a control peer back from a restart, still dead to
        # it) was asked again 10 s later, its row empty meanwhile (QA: 11 s).
        while True:
            await trio.sleep(1.0)
            self.ask_again()

    def _ask(self, member: Member) -> None:
        self._asked[member.id] = trio.current_time()
        self._send_control(member.address)

    def _send_control(self, address: str) -> None:
        assert self.control_address is not None
        message = Control(self.control_address, self._peer.address)
        self._peer.start_soon(self._peer.send, address, message)

    # -- frames -------------------------------------------------------------------
    async def _on_figures_frame(self, sender: str, figures: Figures, reply: Reply) -> None:
        self.on_figures(sender, figures)

    def on_figures(self, sender: str, figures: Figures) -> None:
        if self.control_address is not None:
            self._figures[sender] = dict(figures.values)
            self._heard[sender] = trio.current_time()


async def serve_control_centre(
    peer: ControlledPeer,
    address: str,
    *,
    public: bool = False,
    limits: ControlLimits | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the control centre for a running ``peer`` on ``address`` until cancelled;
    ``await nursery.start(serve_control_centre, peer, address)`` gives the bound
    HOST:PORT. Members, known or joining, push their figures here from then on, and a
    live member whose figures stop coming is asked again."""
    monitor = Monitor(peer)
    serve = functools.partial(serve_control, public=public, limits=limits)
    async with trio.open_nursery() as nursery:
        bound = await nursery.start(serve, monitor, address)
        monitor.attach(bound)
        nursery.start_soon(monitor.ask_again_forever)
        task_status.started(bound)
