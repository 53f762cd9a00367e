"""A peer's advertised address is the one its members know it by and dial."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import trio

from ubipy.config import CrawlConfig
from ubipy.net import request
from ubipy.peer.peer import Peer
from ubipy.wire import Status, StatusRequest, secret_from

SECRET = "s3cret"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


async def test_members_know_and_dial_a_peer_by_its_advertised_address(tmp_path: Path) -> None:
    port = free_port()
    # Another spelling of the same loopback socket: what others are told is not what
    # the socket is bound to, as with a wildcard --listen, but the test stays on loopback.
    advertised = f"localhost:{port}"
    a = Peer(
        CrawlConfig(
            data_dir=tmp_path / "a",
            listen=f"127.0.0.1:{port}",
            advertise=advertised,
            secret=SECRET,
        )
    )
    b = Peer(
        CrawlConfig(
            data_dir=tmp_path / "b",
            listen="127.0.0.1:0",
            join=(f"127.0.0.1:{port}",),
            secret=SECRET,
        )
    )
    seen_by_b: list[str] = []
    a_joined = trio.Event()

    def joined(address: str) -> None:
        seen_by_b.append(address)
        a_joined.set()

    b.on_member_joined(joined)
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run)
        await nursery.start(b.run)
        try:
            with trio.fail_after(30):
                await a_joined.wait()
                answer = await request(b.address, secret_from(SECRET), StatusRequest(cluster=True))
        finally:
            a.stop()
            b.stop()
        with trio.fail_after(30):
            await a.finished.wait()
            await b.finished.wait()
    assert seen_by_b == [advertised]
    assert (a.bound, a.address) == (f"127.0.0.1:{port}", advertised)
    assert isinstance(answer, Status)
    rows = {m.id: m for m in answer.members}
    assert (rows[a.peer_id].address, rows[a.peer_id].state) == (advertised, "alive")
    # B asked A for its figures at that address: A answered, and says it is there.
    figures = {p["peer_id"]: p for p in answer.peers}
    assert figures[a.peer_id]["address"] == advertised


@pytest.mark.parametrize("join_other", [True, False])
async def test_a_peer_advertising_another_live_peer_s_address_stops_saying_so(
    join_other: bool, tmp_path: Path
) -> None:
    """B gives A's address as its own (a copied --advertise), joining C, or A's address
    itself (which it skipped as its own, and founded a cluster beside A's: QA). Its
    dials to that address reach A: it stops, and says why."""
    a = Peer(CrawlConfig(data_dir=tmp_path / "a", listen="127.0.0.1:0", secret=SECRET))
    async with trio.open_nursery() as nursery:
        await nursery.start(a.run)
        c = Peer(
            CrawlConfig(
                data_dir=tmp_path / "c", listen="127.0.0.1:0", join=(a.address,), secret=SECRET
            )
        )
        await nursery.start(c.run)
        b = Peer(
            CrawlConfig(
                data_dir=tmp_path / "b",
                listen="127.0.0.1:0",
                advertise=a.address,
                join=(c.address if join_other else a.address,),
                secret=SECRET,
            )
        )
        try:
            await nursery.start(b.run)
            with trio.fail_after(30):
                await b.finished.wait()
            assert b.advertised_elsewhere == a.peer_id
            # A is still A to the peer B joined.
            answer = await request(c.address, secret_from(SECRET), StatusRequest())
            assert isinstance(answer, Status)
            rows = {m.id: m for m in answer.members}
            assert (rows[a.peer_id].address, rows[a.peer_id].state) == (a.address, "alive")
        finally:
            a.stop()
            c.stop()
            b.stop()
