"""A peer's own id, kept in its shard; and the ids it numbers its requests with (URL
batches, hand-offs, replica rounds, address leases): each run starts at a random point
of a 62-bit space.

Numbered from 1 at every start, a run's request could be answered by an answer to
the previous run's request of the same number: an owner holds its acknowledgements
up to a linger (5 s at most) before sending them, so a peer restarted within that
time (a crash loop, a service manager's quick restart) had a new batch acknowledged
by an old answer, and its outbox rows dropped unsent.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterator

from ubipy.store import PEER_ID_META, Shard

__all__ = ["load_peer_id", "run_ids"]


def load_peer_id(shard: Shard, rng: random.Random) -> str:
    """The peer's id: made once, kept in its shard, so a restart keeps its place."""
    peer_id = shard.get_meta(PEER_ID_META)
    if peer_id is None:
        peer_id = f"{rng.getrandbits(64):016x}"
        with shard.transaction():
            shard.set_meta(PEER_ID_META, peer_id)
    return peer_id


def run_ids(rng: random.Random | None = None) -> Iterator[int]:
    """Ids from a random start in [1, 2**62): a wire id is below 2**63."""
    return itertools.count((rng or random.SystemRandom()).randrange(1, 2**62))
