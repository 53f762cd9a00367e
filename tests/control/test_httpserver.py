"""The control centre's HTTP server against connections that say nothing, or never
read their answers, over real loopback sockets: a silent connection holds a slot for
request_timeout only, and at the cap it gives way to a real request instead of the
request getting 503; so does one that does not take its answers, or lingers after its
last."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio
import trio.testing

from ubipy.control.httpserver import MAX_PIPELINED, Answer, HttpLimits, HttpServer, Request

GET = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
GET_CLOSE = b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
# An answer larger than what the sockets between us hold.
GET_BIG = b"GET /big HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
BODY = b"ok"
BIG = b"x" * (16 << 20)


async def ok(request: Request) -> Answer:
    return Answer(200, BIG if request.path == "/big" else BODY)


async def serve(nursery: trio.Nursery, **limits: Any) -> tuple[HttpServer, int]:
    server = HttpServer(ok, HttpLimits(**limits))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, server.handle, listeners)
    port: int = listeners[0].socket.getsockname()[1]
    return server, port


@asynccontextmanager
async def connections(port: int, n: int) -> AsyncIterator[list[trio.SocketStream]]:
    async with AsyncExitStack() as stack:
        streams = []
        for _ in range(n):
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            streams.append(await stack.enter_async_context(stream))
        yield streams


async def settled(server: HttpServer, connections: int, idle: int) -> None:
    """Until the server holds this many connections, this many of them idle."""
    while (server.connections, server.idle) != (connections, idle):
        await trio.testing.wait_all_tasks_blocked()


async def until_closed(stream: trio.SocketStream) -> bytes:
    chunks = []
    while chunk := await stream.receive_some(65536):
        chunks.append(chunk)
    return b"".join(chunks)


async def one_answer(stream: trio.SocketStream) -> bytes:
    """One kept-alive answer (its body is BODY)."""
    answer = b""
    while not answer.endswith(b"\r\n\r\n" + BODY):
        chunk = await stream.receive_some(65536)
        assert chunk, f"closed after {answer!r}"
        answer += chunk
    return answer


def status_of(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


# --------------------------------------------------------------------------- the cap


async def test_silent_connections_at_the_cap_do_not_keep_a_request_waiting(
    nursery: trio.Nursery,
) -> None:
    server, port = await serve(nursery)  # the defaults: 64 connections, 10 s to ask
    cap = server.limits.max_connections
    # Well under request_timeout: answered at once, not once the silent ones time out.
    with trio.fail_after(server.limits.request_timeout / 4):
        async with connections(port, cap) as silent:
            await settled(server, cap, cap)
            async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                await stream.send_all(GET_CLOSE)
                assert status_of(await until_closed(stream)) == 200
            # The one pushed out was the one waiting longest; the others are held.
            assert await silent[0].receive_some(65536) == b""
            assert (server.evicted, server.refused) == (1, 0)
            await settled(server, cap - 1, cap - 1)


async def test_a_newcomer_pushes_out_the_idle_one_not_one_mid_request(
    nursery: trio.Nursery,
) -> None:
    server, port = await serve(nursery, max_connections=2)
    with trio.fail_after(5):
        async with connections(port, 2) as (busy, idle):
            await busy.send_all(b"GET / HTTP/1.1\r\nHo")
            await settled(server, 2, 1)
            async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                await stream.send_all(GET_CLOSE)
                assert status_of(await until_closed(stream)) == 200
            assert await idle.receive_some(65536) == b""
            await busy.send_all(b"st: a\r\nConnection: close\r\n\r\n")
            assert status_of(await until_closed(busy)) == 200


async def test_a_newcomer_gets_503_only_when_every_connection_is_mid_request(
    nursery: trio.Nursery,
) -> None:
    server, port = await serve(nursery, max_connections=2)
    with trio.fail_after(5):
        async with connections(port, 2) as busy:
            for stream in busy:
                await stream.send_all(b"GET / HTTP/1.1\r\nHo")
            await settled(server, 2, 0)
            async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
                await stream.send_all(GET_CLOSE)
                assert status_of(await until_closed(stream)) == 503
            assert (server.evicted, server.refused) == (0, 1)
            for stream in busy:  # neither was cut short
                await stream.send_all(b"st: a\r\nConnection: close\r\n\r\n")
                assert status_of(await until_closed(stream)) == 200


async def test_refusals_lingering_at_once_are_bounded_too(nursery: trio.Nursery) -> None:
    """Each 503 lingers a second reading what the client still sends: thousands of
    newcomers a second held every descriptor of the process, and the peer's crawl
    stopped (found by a review). Past as many refusals as connections, a newcomer is
    closed unanswered."""
    server, port = await serve(nursery, max_connections=1)
    with trio.fail_after(5):
        async with connections(port, 1) as busy:
            await busy[0].send_all(b"GET / HTTP/1.1\r\nHo")
            await settled(server, 1, 0)
            async with connections(port, 3) as newcomers:
                answers = [await until_closed(stream) for stream in newcomers]
            assert status_of(answers[0]) == 503 and answers[1:] == [b"", b""]
            assert server.refused == 3
            await busy[0].send_all(b"st: a\r\nConnection: close\r\n\r\n")
            assert status_of(await until_closed(busy[0])) == 200


async def test_requests_that_drip_give_way_to_a_newcomer_after_a_second(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A byte each on every connection kept them all mid-request, and every newcomer
    got 503 for the request time-out, again and again; then a byte every little
    while made each request look begun just now (found by reviews)."""
    server, port = await serve(nursery, max_connections=2, request_timeout=10.0)
    async with connections(port, 2) as dripping:
        for _ in range(4):  # a byte each every 0.4 s: a request begins at its first
            for stream in dripping:
                await stream.send_all(b"G")
            await trio.sleep(0.4)
        await settled(server, 2, 0)
        began = trio.current_time()
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(GET_CLOSE)
            assert status_of(await until_closed(stream)) == 200
        assert trio.current_time() - began < 1.0
        assert await dripping[0].receive_some(65536) == b""  # the one begun first
        assert (server.evicted, server.refused) == (1, 0)


async def test_a_request_being_answered_is_not_pushed_out_by_strangers_mid_request(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """The operator's request took the server a while to answer (a seed waits for the
    disk); strangers' connections that sent half a request each pushed it out, and its
    answer was lost, a second in (found by a review). Theirs go first now."""

    async def slow(request: Request) -> Answer:
        if request.path == "/slow":
            await trio.sleep(5.0)
        return Answer(200, BODY)

    server = HttpServer(slow, HttpLimits(max_connections=2, request_timeout=10.0))
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(trio.serve_listeners, server.handle, listeners)
    port = listeners[0].socket.getsockname()[1]
    async with await trio.open_tcp_stream("127.0.0.1", port) as operator:
        await operator.send_all(b"GET /slow HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        await trio.sleep(0.1)
        async with connections(port, 1) as [stranger]:
            await stranger.send_all(b"GET / HTTP/1.1\r\n")
            await trio.sleep(1.5)
            async with connections(port, 1) as [another]:
                await another.send_all(b"GET / HTTP/1.1\r\n")
                assert await stranger.receive_some(65536) == b""  # pushed out
                assert status_of(await one_answer(operator)) == 200
        assert server.evicted == 1


# --------------------------------------------------------------------------- timeouts


async def test_a_silent_connection_is_closed_after_request_timeout_not_idle_timeout(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    server, port = await serve(nursery, request_timeout=5.0, idle_timeout=60.0)
    began = trio.current_time()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        assert await until_closed(stream) == b""  # quietly: it asked nothing
    assert 5.0 <= trio.current_time() - began < 6.0
    assert server.connections == 0


async def test_the_first_request_is_due_within_request_timeout_of_the_accept(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    _, port = await serve(nursery, request_timeout=5.0, idle_timeout=60.0)
    began = trio.current_time()
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await trio.sleep(4.0)  # a client this slow to start...
        await stream.send_all(b"GET / HTTP/1.1\r\nHo")  # ...gets 1 s more, not 5
        assert status_of(await until_closed(stream)) == 408
    assert 5.0 <= trio.current_time() - began < 6.0


async def test_a_kept_alive_connection_gets_idle_timeout_between_requests(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    _, port = await serve(nursery, request_timeout=5.0, idle_timeout=60.0)
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(GET)
        assert status_of(await one_answer(stream)) == 200
        await trio.sleep(30.0)  # far past request_timeout: still kept alive
        await stream.send_all(GET)
        assert status_of(await one_answer(stream)) == 200
        answered = trio.current_time()
        assert await until_closed(stream) == b""
    assert 60.0 <= trio.current_time() - answered < 61.0


# --------------------------------------------------------------------------- answers not taken


async def test_connections_that_do_not_take_their_answers_give_way_after_a_second(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """A client that sends requests and never reads the answers held its slot for the
    request time-out in the answer's send, neither waiting nor reading, so never pushed
    out: 64 of them turned everyone away with 503 (found by a review). An answer not
    taken within a second gives way to a newcomer."""
    server, port = await serve(nursery, max_connections=2, request_timeout=10.0)
    async with connections(port, 2) as greedy:
        for stream in greedy:
            await stream.send_all(GET_BIG)
        await settled(server, 2, 0)
        await trio.sleep(1.5)  # their answers are stuck in full buffers meanwhile
        began = trio.current_time()
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(GET_CLOSE)
            assert status_of(await until_closed(stream)) == 200
        assert trio.current_time() - began < 1.0
        assert (server.evicted, server.refused) == (1, 0)


async def test_a_connection_lingering_after_its_last_answer_gives_way_at_once(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """After an answer that ends a connection, what the client still sends is read for
    a second, and that second could not be cut short: a stranger's bad requests, one
    after another, kept every slot lingering (found by a review)."""
    server, port = await serve(nursery, max_connections=1)
    async with connections(port, 1) as (refused,):
        await refused.send_all(b"GARBAGE\r\n\r\n")
        assert status_of(await until_closed(refused)) == 400  # and the server lingers
        assert server.connections == 1
        async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
            await stream.send_all(GET_CLOSE)
            assert status_of(await until_closed(stream)) == 200
        assert (server.evicted, server.refused) == (1, 0)


async def test_requests_sent_far_ahead_of_their_answers_end_the_connection(
    autojump_clock: trio.testing.MockClock, nursery: trio.Nursery
) -> None:
    """Thousands of requests sent at once were each answered, into buffers the client
    never read. The MAX_PIPELINED-th answer in a row to a request sent ahead closes the
    connection (a pipelining client sends the rest again); requests sent one at a time
    keep it alive."""
    _, port = await serve(nursery)
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        await stream.send_all(GET * (3 * MAX_PIPELINED))
        answers = await until_closed(stream)
    assert answers.count(b"HTTP/1.1 200 ") == MAX_PIPELINED
    assert answers.count(b"Connection: close") == 1
    async with await trio.open_tcp_stream("127.0.0.1", port) as stream:
        for _ in range(3 * MAX_PIPELINED):
            await stream.send_all(GET)
            assert status_of(await one_answer(stream)) == 200
