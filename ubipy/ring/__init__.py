"""Who owns a host: a pure function of the member ids, the same on every peer.

``Ring`` (consistent hashing with virtual nodes) is the placement ubipy uses;
``ModuloPlacement`` and ``TwoLevelPlacement`` are the seed thesis's schemes, kept
behind the same ``Placement`` interface so bench/ring_balance.py can compare them.
"""

from ubipy.ring.arcs import Arc, arc_of, diff
from ubipy.ring.hashing import CIRCLE, HOST_SEED, POINT_SEED, host_point
from ubipy.ring.placement import EmptyRingError, Placement
from ubipy.ring.ring import DEFAULT_VNODES, Owned, Ring
from ubipy.ring.thesis import ModuloPlacement, TwoLevelPlacement

__all__ = [
    "CIRCLE",
    "DEFAULT_VNODES",
    "HOST_SEED",
    "POINT_SEED",
    "Arc",
    "EmptyRingError",
    "ModuloPlacement",
    "Owned",
    "Placement",
    "Ring",
    "TwoLevelPlacement",
    "arc_of",
    "diff",
    "host_point",
]
