"""The ids a peer numbers its requests with (URL batches, hand-offs, replica rounds,
address leases): each run starts at a random point of a 62-bit space.

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

__all__ = ["run_ids"]


def run_ids(rng: random.Random | None = None) -> Iterator[int]:
    """Ids from a random start in [1, 2**62): a wire id is below 2**63."""
    return itertools.count((rng or random.SystemRandom()).randrange(1, 2**62))
