"""A peer's side of monitoring: it pushes its figures, about once a second, to every
control peer that asked (a CONTROL frame), while that control peer is alive, and
stops when told to (a STOP frame from the control centre).

The control centre itself (:mod:`ubipy.control`) is optional: a peer reports to one
that runs elsewhere without importing it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import trio

from ubipy.membership import Membership, MemberState
from ubipy.net import Send
from ubipy.peer.wakeup import Wakeup
from ubipy.wire import Control, Figures, Message, Stop

log = logging.getLogger(__name__)

PUSH_INTERVAL = 1.0
# How long figures go to a control peer that is not a member (yet: gossip has not
# told of it), at the address its CONTROL frame named.
UNKNOWN_PATIENCE = 60.0

Reply = Callable[[Message], Awaitable[None]]


class Reporter:
    """Whom this peer pushes its figures to, and the pushing."""

    def __init__(
        self,
        self_id: str,
        membership: Membership,
        figures: Callable[[], Figures],
        send: Send,
        start_soon: Callable[..., None],
        stop: Callable[[], None],
    ) -> None:
        self._self_id = self_id
        self._membership = membership
        self._figures = figures
        self._send = send
        self._start_soon = start_soon
        self._stop = stop
        # Control peers to push to: id -> (the address its CONTROL named, when).
        self._controls: dict[str, tuple[str, float]] = {}
        self._attached = Wakeup()

    async def on_control(self, sender: str, control: Control, reply: Reply) -> None:
        # The frame is authentic; its sender may not be known here yet (a newcomer
        # hears from the control peer before gossip has told it of that peer), so
        # the peer address to push to comes with it.
        if sender not in self._controls:
            log.info("pushing figures to the control centre on %s", control.control)
        self._controls[sender] = control.peer, trio.current_time()
        self._attached.set()

    async def on_stop(self, sender: str, stop: Stop, reply: Reply) -> None:
        # Said without -v: the operator of each peer sees why it stopped (QA).
        log.warning("stop asked by %s for the whole cluster", sender)
        self._stop()

    async def push_forever(self) -> None:
        # With no control centre to push to, the loop sleeps until one asks: an idle
        # peer's every wake-up costs it CPU (on some machines hundreds of microseconds).
        while True:
            if not self._controls:
                await self._attached.wait()
            await trio.sleep(PUSH_INTERVAL)
            self.push()

    def push(self) -> None:
        if not self._controls:
            return
        figures, now = self._figures(), trio.current_time()
        for control_id, (named, since) in list(self._controls.items()):
            member = self._membership.member(control_id)
            if member is None:
                # Only while gossip may not have told of it yet: a peer that is no
                # member would be pushed to for ever, at any address it named.
                if now - since > UNKNOWN_PATIENCE:
                    del self._controls[control_id]
                    log.info("no member %s: figures no longer pushed to it", control_id)
                    continue
                address = named
            elif member.state in (MemberState.DEAD, MemberState.LEFT):
                # Forgotten, so nothing is pushed for ever to a peer that is gone: a
                # control peer back asks again (its monitor asks every live member
                # whose figures have stopped, whether or not it saw this one go).
                del self._controls[control_id]
                continue
            else:
                address = member.address  # not the one named, whatever it was
            if control_id != self._self_id:
                self._start_soon(self._send, address, figures)
