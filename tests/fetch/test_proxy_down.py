"""A --proxy that cannot be reached: each request's error names the proxy, and the log
says so at most once a minute. Before, hosts were given up "robots.txt unreachable"
after their attempts, with nothing that said why (QA)."""

from __future__ import annotations

import logging
import socket

import httpx2
import pytest
import trio
import trio.testing

from ubipy.fetch.transport import PooledTransport


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_a_proxy_that_refuses_is_named_in_each_error_and_said_once_a_minute(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    port = _closed_port()
    transport = PooledTransport(proxy=f"http://127.0.0.1:{port}")
    errors: list[str] = []
    async with httpx2.AsyncClient(transport=transport) as client:
        with caplog.at_level(logging.WARNING, logger="ubipy.fetch.transport"):
            for url in ["http://a.test/", "https://b.test/", "http://c.test/"]:
                with pytest.raises(httpx2.ConnectError) as failed:
                    await client.get(url)
                errors.append(str(failed.value))
            said = len(caplog.records)
            await trio.sleep(61)
            with pytest.raises(httpx2.ConnectError):
                await client.get("http://d.test/")
    assert all(e.startswith(f"cannot connect to the proxy 127.0.0.1:{port}: ") for e in errors)
    assert said == 1 and len(caplog.records) == 2
    assert f"cannot connect to the proxy 127.0.0.1:{port}" in caplog.records[0].getMessage()
