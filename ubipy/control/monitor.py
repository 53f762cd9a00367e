"""Monitoring: the figures each peer pushes to the control peer, and the control
peer's side of the control centre (:class:`~ubipy.control.server.ControlBackend`).
It sees the peer through :class:`MonitoredPeer`, never the peer's own class.

A peer started with ``--control`` serves the dashboard and tells every member it
learns of through membership (a CONTROL frame) to push its figures there. Every
peer so told pushes a FIGURES frame about once a second to each control peer it
knows that is alive. The control peer is not in the crawl's path: if it is down,
the pushes fail quietly and the crawl goes on; a peer also answers STATUS
requests for itself. A stop from the dashboard reaches every member as a STOP
frame, authenticated like every other frame.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

import trio

from ubipy.membership import LIVE_STATES, Member, MemberState
from ubipy.wire import FrameType

log = logging.getLogger(__name__)

PUSH_INTERVAL = 1.0
# Figures from a peer are at most this many fields, each a number, a string,
# a bool or null: anything else is not figures.
_MAX_FIELDS = 100

Send = Callable[[str, FrameType, Any], Awaitable[bool]]


class MemberView(Protocol):
    def members(self) -> Sequence[Member]: ...

    def member(self, member_id: str) -> Member | None: ...


class Figures(Protocol):
    def as_json(self) -> dict[str, Any]: ...


class MonitoredPeer(Protocol):
    """What the monitor needs of a peer."""

    @property
    def peer_id(self) -> str: ...

    @property
    def address(self) -> str: ...

    @property
    def secret(self) -> bytes: ...

    @property
    def membership(self) -> MemberView: ...

    def status(self) -> Figures: ...

    def seed_urls(self, urls: object) -> dict[str, Any]: ...

    def start_soon(self, fn: Callable[..., Awaitable[object]], *args: object) -> None: ...

    def stop(self) -> None: ...


class Monitor:
    """One per peer: pushes this peer's figures, and on a control peer keeps the
    others' and answers the control server."""

    def __init__(self, peer: MonitoredPeer, send: Send) -> None:
        self._peer = peer
        self._send = send
        # Control peers to push to: id -> address.
        self._controls: dict[str, str] = {}
        # On a control peer: the latest figures each member pushed.
        self._figures: dict[str, dict[str, Any]] = {}
        self.control_address: str | None = None

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

    def seed(self, urls: list[str]) -> Mapping[str, Any]:
        return self._peer.seed_urls(urls)

    def stop_cluster(self) -> None:
        self._peer.start_soon(self._stop_cluster)

    async def _stop_cluster(self) -> None:
        peer = self._peer
        log.info("stop of the whole cluster asked from the control centre")
        with trio.move_on_after(5.0):
            async with trio.open_nursery() as nursery:
                for m in peer.membership.members():
                    if m.id != peer.peer_id and m.state in LIVE_STATES:
                        nursery.start_soon(self._send, m.address, FrameType.STOP, {})
        peer.stop()

    # -- membership -----------------------------------------------------------------
    def member_joined(self, address: str) -> None:
        """A control peer tells every member it learns of to push its figures here."""
        if self.control_address is not None:
            payload = {"control": self.control_address, "peer": self._peer.address}
            self._peer.start_soon(self._send, address, FrameType.CONTROL, payload)

    # -- frames -------------------------------------------------------------------
    def on_control(self, sender: str, payload: Any) -> None:
        # The frame is authentic; its sender may not be known here yet (a newcomer
        # hears from the control peer before gossip has told it of that peer), so
        # the peer address to push to comes with it.
        if not (
            isinstance(payload, dict)
            and isinstance(payload.get("control"), str)
            and isinstance(payload.get("peer"), str)
        ):
            raise ValueError("CONTROL without the control centre's and the peer's address")
        if sender not in self._controls:
            log.info("pushing figures to the control centre on %s", payload["control"])
        self._controls[sender] = payload["peer"]

    def on_figures(self, sender: str, payload: Any) -> None:
        if self.control_address is None:
            return  # not a control peer (any more): nothing to keep
        if not (
            isinstance(payload, dict)
            and len(payload) <= _MAX_FIELDS
            and all(
                isinstance(k, str) and (v is None or isinstance(v, int | float | str | bool))
                for k, v in payload.items()
            )
        ):
            raise ValueError("figures are a flat map of numbers and strings")
        self._figures[sender] = payload

    # -- pushing ------------------------------------------------------------------
    async def push_forever(self) -> None:
        while True:
            await trio.sleep(PUSH_INTERVAL)
            self.push()

    def push(self) -> None:
        if not self._controls:
            return
        peer = self._peer
        figures = peer.status().as_json()
        for control_id, address in list(self._controls.items()):
            member = peer.membership.member(control_id)
            if member is not None and member.state in (MemberState.DEAD, MemberState.LEFT):
                del self._controls[control_id]  # a control peer back asks again
                continue
            if control_id != peer.peer_id:
                peer.start_soon(self._send, address, FrameType.FIGURES, figures)
