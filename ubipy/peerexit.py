"""What ``ubipy peer`` says as it exits, and its exit status: the pages of this run,
and why a peer stopped of its own accord or lost work at its stop (1), so that a
service manager and the operator both see it."""

from __future__ import annotations

from ubipy.peer import Peer
from ubipy.wording import counted


def said_at_exit(peer: Peer) -> tuple[list[str], int]:
    """The lines for standard error, and the exit status."""
    lines = [
        f"ubipy peer {peer.peer_id} stopped: {counted(peer.crawler.stats.pages, 'page')} this run"
    ]
    if unsaved := peer.crawler.unsaved:
        # Stopped while the disk was full, say: they were dropped without a word, and
        # the peer exited 0 (QA). Their URLs stay pending in the shard.
        lines.append(
            f"ubipy peer: {counted(unsaved, 'fetched page')} not saved: the shard refused "
            f"writes ({peer.crawler.storage_error}); they are asked again at the next start"
        )
        return lines, 1
    if peer.clashed_with is not None:
        lines.append(
            f"ubipy peer: stopped: the live peer at {peer.clashed_with} has this peer's id "
            f"({peer.peer_id}), kept in {peer.config.data_dir}: was the directory copied? "
            "Give each peer a data directory of its own"
        )
        return lines, 1
    if peer.advertised_elsewhere is not None:
        lines.append(
            f"ubipy peer: stopped: its address {peer.address} reaches the live peer "
            f"{peer.advertised_elsewhere}, not this one: give --advertise the address "
            "the other peers reach this one at"
        )
        return lines, 1
    return lines, 0
