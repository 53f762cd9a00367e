"""Another live process under this member's id (:class:`IdClash`).

A peer's id is kept in its data directory, so a directory copied from another
peer's (a cloned disk image, a ``cp -r`` to start a second peer) starts a second
process under the same id. Each hears ALIVE rumours about itself from the other's
address at an incarnation it must outbid, and outbids it; the other does the same,
without end, while both own the same share of the ring and fetch its hosts, each at
the full rate a host allows.

A previous life of a peer restarted on another address (a new pod IP) is outbid
once or twice and is heard of no more: it is not there to answer. Only a live
process answers an outbid with a higher incarnation from the same address, again
and again. No I/O and no clock, as the machine.
"""

from __future__ import annotations

from collections import deque
from typing import Final

from ubipy.membership.events import Outgoing
from ubipy.membership.messages import Gossip, Update

__all__ = ["CLASH_OUTBIDS", "CLASH_WINDOW", "IdClash"]

# Outbids of one address within the window that make a clash. The one outbid hears
# of the other's next ALIVE late, by a push-pull (every 30 s) or a probe's answer:
# the others' gossip about the id goes to the address they hold for it, the
# other's. A dead previous life is outbid once for each incarnation it reached.
CLASH_OUTBIDS: Final = 3
CLASH_WINDOW: Final = 180.0


class IdClash:
    """Counts the outbids of ALIVE rumours about ourselves from other addresses."""

    __slots__ = ("_outbids", "_tell", "with_address")

    def __init__(self) -> None:
        self._outbids: dict[str, deque[float]] = {}
        self._tell: list[Outgoing] = []
        # The address of the other process under our id, once it is known.
        self.with_address: str | None = None

    def outbid(self, address: str, now: float, alive: Update) -> None:
        """We outbid an ALIVE about ourselves from ``address`` with ``alive``: a clash
        (``with_address``) once its outbids are enough. Until one is known, ``alive``
        also goes to ``address`` straight (:meth:`drain`), in a frame that names our
        id: a live process there outbids it at once, and tells us so, rather than a
        push-pull later (30 s apart by default; found out after 30-80 s before). A
        previous life is not there to answer."""
        if self.with_address is None:
            self._tell.append(Outgoing(address, Gossip((alive,)), to=alive.member_id))
        times = self._outbids.setdefault(address, deque(maxlen=CLASH_OUTBIDS))
        times.append(now)
        if len(times) == CLASH_OUTBIDS and now - times[0] <= CLASH_WINDOW:
            self.with_address = address

    def drain(self) -> list[Outgoing]:
        """The outbids to tell straight to the other process (see :meth:`outbid`)."""
        tell, self._tell = self._tell, []
        return tell
