"""Which of two live peers under one id stops (see :mod:`ubipy.membership.clash`).

Two processes whose data directories hold the same peer id (one copied from the
other's) own the same share of the ring and fetch its hosts side by side. Once
the membership machine has seen the other's outbids, the peer on the greater
address stops; both decide alike, each knowing both addresses. It stops without a
leave and without handing its hosts on: the id and its share stay the other's.
"""

from __future__ import annotations

import logging

__all__ = ["stops_for_clash"]

log = logging.getLogger(__name__)


def stops_for_clash(peer_id: str, address: str, other: str) -> bool:
    """Whether the peer ``peer_id`` on ``address`` is the one that stops for the live
    peer on ``other`` under its id; it says why when it is."""
    if address <= other:
        return False
    log.error(
        "peer id %s is also that of the live peer at %s (was one data directory copied "
        "from the other?): this peer stops; give each peer a data directory of its own",
        peer_id,
        other,
    )
    return True
