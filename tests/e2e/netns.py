"""Network namespaces for tests with real processes: several machines on one bridge,
each with its own address and, if asked, its own ``/etc/hosts`` (``ip netns exec``
mounts ``/etc/netns/NAME/hosts`` over it). Everything made is removed on the way out."""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import trio

from tests.e2e.cluster import PeerProcess, start_peer_or_fail

NETNS_ETC = Path("/etc/netns")


def can_make_namespaces() -> bool:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        return False
    probe = f"ubipy-probe-{secrets.token_hex(3)}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, check=False)
    if made.returncode != 0:
        return False
    subprocess.run(["ip", "netns", "del", probe], capture_output=True, check=False)
    return True


def ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextmanager
def bridged_namespaces(
    n: int, subnet: str, hosts: Mapping[str, Sequence[str]] | None = None
) -> Iterator[list[str]]:
    """``n`` namespaces on one bridge: the i-th has ``subnet.(10 + i)``, the bridge
    ``subnet.1``. ``hosts`` (a name and its addresses, in the file's order) become each
    namespace's /etc/hosts, every address of a name returned (glibc's ``multi on``)."""
    tag = secrets.token_hex(2)
    bridge, names = f"ubr{tag}", [f"ubipy-{tag}-{i}" for i in range(n)]
    made: list[tuple[str, ...]] = []
    etc: list[Path] = []
    made_netns_etc = False
    try:
        ip("link", "add", bridge, "type", "bridge")
        made.append(("link", "del", bridge))
        ip("addr", "add", f"{subnet}.1/24", "dev", bridge)
        ip("link", "set", bridge, "up")
        for i, ns in enumerate(names):
            outside, inside = f"ub{tag}o{i}", f"ub{tag}i{i}"
            ip("netns", "add", ns)
            made.append(("netns", "del", ns))
            ip("link", "add", outside, "type", "veth", "peer", "name", inside)
            made.append(("link", "del", outside))
            ip("link", "set", inside, "netns", ns)
            ip("link", "set", outside, "master", bridge, "up")
            ip("-n", ns, "addr", "add", f"{subnet}.{10 + i}/24", "dev", inside)
            ip("-n", ns, "link", "set", inside, "up")
            ip("-n", ns, "link", "set", "lo", "up")
            if hosts is not None:
                if not NETNS_ETC.exists():
                    NETNS_ETC.mkdir()
                    made_netns_etc = True
                own = NETNS_ETC / ns
                own.mkdir()  # the namespace's name is new: so is its directory
                etc.append(own)
                lines = ["127.0.0.1 localhost", "::1 localhost"]
                lines += [f"{a} {name}" for name, addresses in hosts.items() for a in addresses]
                (own / "hosts").write_text("\n".join(lines) + "\n")
                (own / "host.conf").write_text("multi on\n")
        yield names
    finally:
        for undo in reversed(made):
            subprocess.run(["ip", *undo], capture_output=True, check=False)
        for own in etc:
            for name in ("hosts", "host.conf"):
                (own / name).unlink(missing_ok=True)
            own.rmdir()
        if made_netns_etc:
            NETNS_ETC.rmdir()


async def relay(listen_host: str, target_port: int, *, task_status: trio.TaskStatus[int]) -> None:
    """The synthetic web's proxy serves loopback only: this carries bytes between the
    bridge address, which the namespaces reach, and it."""

    async def pipe(a: trio.abc.Stream, b: trio.abc.Stream) -> None:
        try:
            while data := await a.receive_some(65536):
                await b.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        finally:
            await trio.aclose_forcefully(b)

    async def handle(client: trio.SocketStream) -> None:
        try:
            upstream = await trio.open_tcp_stream("127.0.0.1", target_port)
        except OSError:
            await client.aclose()
            return
        async with trio.open_nursery() as both:
            both.start_soon(pipe, client, upstream)
            both.start_soon(pipe, upstream, client)

    listeners = await trio.open_tcp_listeners(0, host=listen_host)
    task_status.started(listeners[0].socket.getsockname()[1])
    await trio.serve_listeners(handle, listeners)


async def start_in_namespaces(
    nursery: trio.Nursery, names: Sequence[str], subnet: str, proxy: str, data: Path, *extra: str
) -> list[PeerProcess]:
    """A peer in each namespace of ``names`` (made by bridged_namespaces over ``subnet``),
    listening on ``subnet``.10 on, each but the first joining the first; ``extra``
    goes on every command line, data directories under ``data``."""
    peers: list[PeerProcess] = []
    for i, ns in enumerate(names):
        join = ("--join", f"{subnet}.10:7000") if i else ()
        peers.append(
            await start_peer_or_fail(
                nursery, data / f"p{i}", proxy, *extra, *join,
                listen=f"{subnet}.{10 + i}:7000",
                prefix=("ip", "netns", "exec", ns),
            )
        )  # fmt: skip
    return peers
