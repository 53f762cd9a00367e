"""One request and its reply on a connection of its own, as the command line asks a
peer (``ubipy status``, ``ubipy seed``): the peer's framing, without its links."""

from __future__ import annotations

import secrets
import time

import trio

from ubipy.errors import WireError
from ubipy.net.links import READ_SIZE, hello_before
from ubipy.net.network import Network, TcpNetwork
from ubipy.wire import (
    CLOSED,
    NEED_DATA,
    Frame,
    FrameReader,
    FrameWriter,
    Message,
    RejectReason,
    ReplayGuard,
    decode,
    new_epoch,
)

__all__ = ["request"]


async def request(
    address: str,
    secret: bytes,
    message: Message,
    *,
    patience: float = 10.0,
    network: Network | None = None,
) -> Message:
    """One request and its reply on a connection of its own (for the command line).

    Raises OSError if the peer cannot be reached, does not answer in time or answers
    something malformed, and PermissionError if it answers nothing authentic (a
    wrong secret).
    """
    network = network or TcpNetwork()
    me = "cli-" + secrets.token_hex(4)
    writer = FrameWriter(secret, me, new_epoch())
    reader = FrameReader(secret, ReplayGuard(local_id=me))
    try:
        with trio.fail_after(patience):
            stream = await network.connect(address)
            async with stream:
                asked = writer.frame(message.KIND, message.to_wire(), time.time())
                if hello := hello_before(writer, asked):
                    await stream.send_all(hello)
                await stream.send_all(asked)
                while True:
                    event = reader.next_event(time.time())
                    if event is NEED_DATA:
                        data = await stream.receive_some(READ_SIZE)
                        reader.receive_data(bytes(data))
                        continue
                    if isinstance(event, Frame):
                        try:
                            return decode(event.type, event.payload)
                        except WireError as exc:
                            raise OSError(f"{address} answered a malformed frame: {exc}") from exc
                    if event is CLOSED and reader.close_reason is RejectReason.REFUSED:
                        raise PermissionError(
                            f"the peer at {address} refused the secret (it is not the cluster's)"
                        )
                    if event is CLOSED:
                        raise PermissionError(
                            f"{address} closed the connection without an authentic answer "
                            "(is it a ubipy peer, with this secret?)"
                        )
    except trio.TooSlowError as exc:
        raise OSError(
            f"{address} did not answer within {patience} s (is it a ubipy peer, with this secret?)"
        ) from exc
    except trio.BrokenResourceError as exc:
        raise OSError(f"{address} dropped the connection: {exc}") from exc
