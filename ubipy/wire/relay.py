"""The RELAY frame: a whole frame for another peer, carried by a third one when the
two cannot reach each other directly (one cut link between two members that the
rest of the cluster still sees alive: membership's indirect probes keep both in the
ring, and without a relay their batches, hand-offs and, under ``--replicas 2``, the
barriers of the hosts whose owner and successor they are never arrived).

The inner frame is as its sender wrote it for its recipient (tag, sender, recipient,
sequence number), so the recipient checks it as any frame of that sender: the relay
can neither read a secret it lacks nor change a byte. ``hops`` is 0 from the sender
and 1 from the relay, which forwards a frame once and only a sender's own.

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from ubipy.errors import WireError
from ubipy.wire.frames import DEFAULT_MAX_FRAME, MAX_ID_LEN, FrameType
from ubipy.wire.payloads import _int, _map, _str

# What the wrapping costs a frame, at most: an inner frame this much under the cap fits.
RELAY_OVERHEAD: Final = 512
MAX_RELAYED: Final = DEFAULT_MAX_FRAME - RELAY_OVERHEAD


@dataclass(frozen=True, slots=True)
class Relay:
    """RELAY: ``frame``, whole, for the peer ``to``; ``hops``: 0 from its sender, 1
    from the relay that forwards it."""

    KIND: ClassVar = FrameType.RELAY
    to: str
    frame: bytes
    hops: int = 0

    def to_wire(self) -> dict[str, object]:
        return {"to": self.to, "frame": self.frame, "hops": self.hops}

    @classmethod
    def from_wire(cls, obj: object) -> Relay:
        payload = _map(obj, "a relay")
        to = _str(payload.get("to"), "a relay's recipient")
        if not 0 < len(to) <= MAX_ID_LEN:
            raise WireError("a relay's recipient must be a peer id")
        frame = payload.get("frame")
        if type(frame) is not bytes or not 0 < len(frame) <= MAX_RELAYED:
            raise WireError(f"a relayed frame must be 1 to {MAX_RELAYED} bytes")
        return cls(to, frame, _int(payload.get("hops"), "a relay's hops", 0, 2))
