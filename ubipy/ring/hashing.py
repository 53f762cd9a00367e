"""The hash functions every peer must agree on, bit for bit.

Placement is only consistent across a cluster if each peer maps the same host and
the same member id to the same numbers, in any process, on any machine and under
any Python version. Python's ``hash()`` is salted per process (PYTHONHASHSEED), so it
is never used here: everything goes through xxh3-64 over UTF-8 with fixed seeds.
Changing any constant in this module reassigns every host, so it is a protocol
change, not a tuning knob.
"""

from __future__ import annotations

from typing import Final

from xxhash import xxh3_64_intdigest

#: Size of the circle: points are unsigned 64-bit integers in ``[0, CIRCLE)``.
CIRCLE: Final = 1 << 64

#: Seed for a host's position on the circle (and for the modulo schemes' hash).
HOST_SEED: Final = 0x75626970_79686F73  # "ubipyhos"

#: Seed for a member's virtual points. Distinct from HOST_SEED so that a host whose
#: name happens to equal a point key is not pinned to that point.
POINT_SEED: Final = 0x75626970_7976_6E64  # "ubipyvnd"


def host_point(host: str) -> int:
    """The host's position on the circle, in ``[0, CIRCLE)``."""
    return xxh3_64_intdigest(host.encode("utf-8"), seed=HOST_SEED)


def member_points(member: str, count: int) -> list[int]:
    """The ``count`` virtual points of ``member``.

    Point ``i`` hashes ``member + "#" + str(i)``. The decimal suffix holds no ``#``,
    so the key is injective: no two (member, i) pairs share a key.
    """
    prefix = member + "#"
    return [
        xxh3_64_intdigest((prefix + str(i)).encode("utf-8"), seed=POINT_SEED) for i in range(count)
    ]
