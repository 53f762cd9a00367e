"""A peer whose advertised address is another live peer's (a ``--advertise`` copied
from another machine's): the others would send that peer's frames for this one, and
this one's to it. Given in a ``--join`` list as well, the address was skipped as this
peer's own, and it founded a cluster beside that peer's, crawling the same hosts
(QA). It is found two ways: the peer asks its advertised address who is there, once,
at its start; and a dial to that address answered by another peer (membership pings
the peer listed there) says so later. Either way the peer stops, saying why.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence

from ubipy.net import Network, request
from ubipy.wire import Scalar, Status, StatusRequest

__all__ = ["answer_at", "said_elsewhere", "who_answers"]

log = logging.getLogger(__name__)


async def _rows_at(
    address: str, secret: bytes, network: Network, patience: float
) -> Sequence[Mapping[str, Scalar]]:
    """What the peer answering at ``address`` says of itself (its own row alone: a
    status request not of the cluster); nothing if none answers from here."""
    try:
        answer = await request(address, secret, StatusRequest(), patience=patience, network=network)
    except OSError:
        return ()
    return answer.peers if isinstance(answer, Status) else ()


async def who_answers(address: str, secret: bytes, network: Network) -> str | None:
    """The id of the peer that answers at ``address``; None if none does from here (a
    NAT without hairpin, a firewall: nothing to say)."""
    ids = sorted(str(row.get("peer_id")) for row in await _rows_at(address, secret, network, 10.0))
    return ids[0] if ids else None


async def answer_at(
    address: str, secret: bytes, network: Network, peer_id: str, run: int
) -> str | None:
    """The id of the peer that answers at ``address`` (None: none does, from here, or
    it is this very process, a name that stands for it too). ``peer_id`` itself means
    another live process under it (of another ``run`` than this one's): a copy of its
    data directory joining its original directly, whose frames each takes for its own
    reflected, so that no third peer hears both (QA)."""
    rows = await _rows_at(address, secret, network, 5.0)
    # Of a run said: a peer before runs were said is not told apart from this one.
    ids = [str(row.get("peer_id")) for row in rows if row.get("peer_id") != peer_id]
    if any(r.get("peer_id") == peer_id and r.get("run") not in (None, run) for r in rows):
        return peer_id
    return min(ids, default=None)


def said_elsewhere(address: str, other: str) -> None:
    """Say that this peer's advertised ``address`` reaches the live peer ``other``."""
    log.error(
        "this peer's address %s reaches the live peer %s, not this one: this peer stops; "
        "give --advertise the address the others reach this peer at",
        address,
        other,
    )
