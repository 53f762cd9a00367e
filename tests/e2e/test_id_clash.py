"""A data directory copied from a live peer's and started as a second peer, as OS
processes on loopback: the two run under one id; the one on the greater address stops
with a clear error and exit status 1, without a leave, and the other goes on."""

from __future__ import annotations

import shutil
from pathlib import Path

import trio

from tests.e2e.cluster import members_alive, start_peer_or_fail, stop_all, wait_for_one_view
from ubipy.synthweb import SyntheticWeb, WebSpec
from ubipy.synthweb.server import serve


async def test_a_copied_data_directory_stops_with_a_clear_error(tmp_path: Path) -> None:
    web = SyntheticWeb(WebSpec(seed=5, hosts=4, pages_per_host=5))
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        proxy = server.proxy_url
        first = await start_peer_or_fail(nursery, tmp_path / "a", proxy)
        second = await start_peer_or_fail(nursery, tmp_path / "b", proxy, "--join", first.address)
        await wait_for_one_view([first, second], {first.peer_id, second.peer_id}, within=30)
        shutil.copytree(second.data, tmp_path / "c")  # with its lock file, as cp -r does
        copy = await start_peer_or_fail(nursery, tmp_path / "c", proxy, "--join", first.address)
        peers = [first, second, copy]
        try:
            assert copy.peer_id == second.peer_id
            stops, stays = sorted([second, copy], key=lambda p: p.address, reverse=True)
            # At the default settings (a push-pull every 30 s): the two tell each
            # other their outbids straight, through each other's replay guard.
            with trio.fail_after(15):
                code = await stops.proc.wait()
            assert code == 1
            said = bytes(stops.output).decode(errors="replace")
            assert f"the live peer at {stays.address} has this peer's id" in said
            assert stays.proc.returncode is None
            assert await members_alive(stays) == {first.peer_id, stays.peer_id}
            assert b"left" not in b"".join(
                line for line in first.output.splitlines() if stays.peer_id.encode() in line
            )
        finally:
            await stop_all(peers)
        nursery.cancel_scope.cancel()


async def test_a_copy_that_joins_its_original_directly_stops(tmp_path: Path) -> None:
    """With no third peer to hear both, each took the other's frames for its own
    reflected, and the copy tried its join for ever (QA). It asks the address that
    does not answer who is there, and stops: another live process under its id."""
    web = SyntheticWeb(WebSpec(seed=5, hosts=4, pages_per_host=5))
    async with trio.open_nursery() as nursery:
        server = await nursery.start(serve, web)
        proxy = server.proxy_url
        first = await start_peer_or_fail(nursery, tmp_path / "a", proxy)
        shutil.copytree(first.data, tmp_path / "c")
        copy = await start_peer_or_fail(nursery, tmp_path / "c", proxy, "--join", first.address)
        try:
            assert copy.peer_id == first.peer_id
            with trio.fail_after(15):
                code = await copy.proc.wait()
            assert code == 1
            said = bytes(copy.output).decode(errors="replace")
            assert f"the live peer at {first.address} has this peer's id" in said
            assert first.proc.returncode is None
        finally:
            await stop_all([first, copy])
        nursery.cancel_scope.cancel()
