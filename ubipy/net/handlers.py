"""How a peer's components meet the links: the handler of a frame kind, the reply on
its connection, and the send of a frame to an address."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

from ubipy.wire import Frame, Message

__all__ = ["Handle", "Handler", "Reply", "Send"]

Reply = Callable[[Message], Awaitable[None]]
# The frame (its sender, its kind) and the message it carries, already typed.
Handler = Callable[[Frame, Message, Reply], Awaitable[None]]
# How a peer's components send one frame to an address (False: it could not be sent).
Send = Callable[[str, Message], Awaitable[bool]]

M = TypeVar("M", bound=Message)


class Handle(Protocol):
    """How a peer routes a frame kind to its handler (``Peer.handle``): the handler
    gets the sender's id, the message, and a way to reply on its connection."""

    def __call__(
        self, kind: type[M], handler: Callable[[str, M, Reply], Awaitable[None]]
    ) -> None: ...
