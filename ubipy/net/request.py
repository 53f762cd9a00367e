"""One request and its reply on a connection of its own, as the command line asks a
peer (``ubipy status``, ``ubipy seed``): the peer's framing, without its links."""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable

import trio

from ubipy.errors import WireError
from ubipy.net.links import READ_SIZE
from ubipy.net.network import Network, TcpNetwork
from ubipy.wire import (
    CLOSED,
    HTTP_ANSWER,
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
    waiting: Callable[[], None] | None = None,
    waiting_after: float = 5.0,
) -> Message:
    """One request and its reply on a connection of its own (for the command line).

    ``waiting`` is called once if no answer has come ``waiting_after`` seconds in (and
    the patience is longer): a frozen peer accepts the connection and says nothing, and
    the user should not sit before a silent prompt for the whole patience.

    Raises OSError if the peer cannot be reached, does not answer in time or answers
    something malformed, and PermissionError if it answers nothing authentic (a
    wrong secret).
    """
    if waiting is None or waiting_after >= patience:
        return await _request(address, secret, message, patience, network)

    async def say_waiting() -> None:
        await trio.sleep(waiting_after)
        waiting()

    # The request's own errors are raised outside the nursery, as themselves, not in
    # an exception group.
    failed: Exception | None = None
    async with trio.open_nursery() as nursery:
        nursery.start_soon(say_waiting)
        try:
            answer = await _request(address, secret, message, patience, network)
        except Exception as exc:
            failed = exc
        finally:
            nursery.cancel_scope.cancel()
    if failed is not None:
        raise failed
    return answer


async def _request(
    address: str, secret: bytes, message: Message, patience: float, network: Network | None
) -> Message:
    network = network or TcpNetwork()
    me = "cli-" + secrets.token_hex(4)
    writer = FrameWriter(secret, me, new_epoch())
    reader = FrameReader(secret, ReplayGuard(local_id=me))
    connected = False
    try:
        with trio.fail_after(patience):
            stream = await network.connect(address)
            connected = True
            async with stream:
                asked = writer.frame(message.KIND, message.to_wire(), time.time())
                if hello := writer.hello_before(asked, time.time()):
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
                    if event is CLOSED and reader.close_detail.endswith(HTTP_ANSWER):
                        raise OSError(
                            f"{address} is an HTTP server, not a ubipy peer's port "
                            "(a control centre's?)"
                        )
                    if event is CLOSED:
                        raise PermissionError(
                            f"{address} closed the connection without an authentic answer "
                            "(is it a ubipy peer, with this secret?)"
                        )
    except trio.TooSlowError as exc:
        if not connected:
            raise OSError(
                f"{address} did not take the connection within {patience} s (a firewall "
                "that drops it, or a machine that is down?)"
            ) from exc
        # Its kernel took the connection: a peer stopped or stalled (QA: SIGSTOP) that
        # acts on what it was sent once it runs again, or not a ubipy peer at all.
        raise OSError(
            f"{address} took the connection but did not answer within {patience} s: a "
            "peer stalled or stopped (what was sent may still be done when it runs "
            "again), or not a ubipy peer"
        ) from exc
    except trio.BrokenResourceError as exc:
        # A peer resets at once the connections of an address it bars (QA: a peer
        # started with another secret on the same machine got the operator's own
        # `ubipy status` turned away, in words that said nothing of why).
        raise OSError(
            f"{address} dropped the connection ({exc.__cause__ or exc}); if it does so at "
            "once, again and again: a peer turns away for 30 s an address whose "
            "connections kept failing to authenticate (a process with another secret on "
            "this machine?)"
        ) from exc
