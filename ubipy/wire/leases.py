"""The IP lease frames: how peers keep the per-IP rule across the cluster.

Hosts sharing one address land on different peers, so the rule "one request in
flight per address, a delay between two" cannot be kept by each peer alone. The
owner of an address on the ring (the ring owner of the address's string) holds its
lease: a peer asks it before each request to a host on that address (IP_LEASE),
the owner answers with a grant or a denial and how long to wait (IP_GRANT), and the
holder gives the lease back when its request ends (IP_RELEASE), until the owner
answers that too (an IP_GRANT that grants nothing). An ask names the asker's run (its
process), and while a request runs its holder renews the lease now and then (IP_LEASE
again, ``held``): what an owner restarted since needs to know, its table being lost.

Checked here: shape and types, as in :mod:`ubipy.wire.payloads`. Whether the
receiver owns the address is the peer's to decide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Final

from ubipy.errors import WireError
from ubipy.wire.frames import FrameType
from ubipy.wire.payloads import MAX_MARK_DELAY, _finite, _int, _map, _str

# An IPv6 address with a zone is under 64 characters; anything far longer is no
# address, and would only make the owner hash and keep junk.
MAX_ADDRESS_LEN: Final = 100
# A wait longer than a day is a bug at the owner, as a host mark's delay would be.
MAX_LEASE_WAIT: Final = MAX_MARK_DELAY


def _check_address(address: str) -> None:
    if not 0 < len(address) <= MAX_ADDRESS_LEN:
        raise WireError(f"a lease's address is 1 to {MAX_ADDRESS_LEN} characters")


def _address(obj: object) -> str:
    return _str(obj, "a lease's address")  # its length is checked as the message is built


def _id_and_address(obj: object, what: str) -> tuple[int, str]:
    """The ``id`` and ``address`` every lease frame carries, from its payload map."""
    payload = _map(obj, what)
    return _int(payload.get("id"), "a lease id"), _address(payload.get("address"))


@dataclass(frozen=True, slots=True)
class IpLease:
    """IP_LEASE: may the sender make one request to ``address`` now? ``id`` names the
    request (unique per sender process); the answer and the release carry it.

    ``run`` names the sender's process (when it started, in microseconds; None from a
    peer of an earlier version): an ask of a new run says the sender restarted, and the
    leases its earlier run held ended with that process. ``held``: the sender holds
    this lease already (granted, or the request went ahead with the owner silent) and
    its request runs: a renewal, which an owner restarted since, its table lost, takes
    as the lease held. Both are sent only when set, and a peer of an earlier version,
    which reads ``id`` and ``address`` alone, takes the frame as an ask as before (a
    renewal of a lease it holds for that request is granted again)."""

    KIND: ClassVar = FrameType.IP_LEASE
    id: int
    address: str
    run: int | None = None
    held: bool = False

    def __post_init__(self) -> None:
        _check_address(self.address)
        if self.run is not None:
            _int(self.run, "a lease's run")

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"id": self.id, "address": self.address}
        if self.run is not None:
            wire["run"] = self.run
        if self.held:
            wire["held"] = True
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> IpLease:
        lease_id, address = _id_and_address(obj, "an IP lease request")
        payload = _map(obj, "an IP lease request")
        run = _int(payload["run"], "a lease's run") if "run" in payload else None
        held = payload.get("held", False)
        if type(held) is not bool:
            raise WireError("a lease request's held must be a bool")
        return cls(lease_id, address, run, held)


@dataclass(frozen=True, slots=True)
class IpGrant:
    """IP_GRANT: the owner's answer to IP_LEASE ``id``: granted, or not and for how
    many seconds the address will not be free (``wait``, 0 when granted). Not granted,
    with no wait, it also answers IP_RELEASE ``id``: taken (a peer of an older version
    ignores it, as the answer to no request of its)."""

    KIND: ClassVar = FrameType.IP_GRANT
    id: int
    address: str
    granted: bool
    wait: float = 0.0

    def __post_init__(self) -> None:
        _check_address(self.address)
        if not 0 <= self.wait <= MAX_LEASE_WAIT:
            raise WireError("a lease's wait is between 0 and a day")

    def to_wire(self) -> dict[str, object]:
        return {"id": self.id, "address": self.address, "granted": self.granted, "wait": self.wait}

    @classmethod
    def from_wire(cls, obj: object) -> IpGrant:
        lease_id, address = _id_and_address(obj, "an IP lease answer")
        payload = _map(obj, "an IP lease answer")
        granted = payload.get("granted")
        if type(granted) is not bool:
            raise WireError("a lease answer's granted must be a bool")
        return cls(lease_id, address, granted, _finite(payload.get("wait", 0.0), "a lease's wait"))


@dataclass(frozen=True, slots=True)
class IpRelease:
    """IP_RELEASE: the request made under lease ``id`` on ``address`` has ended (or
    was never made); the address waits its delay from now, or ``wait`` seconds if
    longer: what its server asked, as the holder heard it (its pace: a slow server, a
    503's back-off; a Retry-After). Sent only past the IP delay, so a peer of an older
    version, which reads ``id`` and ``address`` alone, takes the frame as before.
    Sent again until the owner answers it (IP_GRANT); a second copy frees nothing."""

    KIND: ClassVar = FrameType.IP_RELEASE
    id: int
    address: str
    wait: float = 0.0

    def __post_init__(self) -> None:
        _check_address(self.address)
        if not 0 <= self.wait <= MAX_LEASE_WAIT:
            raise WireError("a lease's wait is between 0 and a day")

    def to_wire(self) -> dict[str, object]:
        wire: dict[str, object] = {"id": self.id, "address": self.address}
        if self.wait:
            wire["wait"] = self.wait
        return wire

    @classmethod
    def from_wire(cls, obj: object) -> IpRelease:
        lease_id, address = _id_and_address(obj, "an IP lease release")
        wait = _map(obj, "an IP lease release").get("wait", 0.0)
        return cls(lease_id, address, _finite(wait, "a lease's wait"))
