"""A deterministic discrete-event simulator for the membership state machine.

Plain Python with virtual time: a heap of timed events (a node's tick at its
``next_deadline()``, or a message arriving), popped in order. It is equivalent to
running the trio driver under ``trio.testing.MockClock`` with autojump, without
the task switching, which makes 200 seeded runs take seconds rather than minutes.

The network: datagrams take a uniform 1-5 ms and are lost with probability
``loss``; stream messages (push-pull) take the same latency but are never lost
(TCP), only refused when the receiver is down. Every random draw comes from
``random.Random`` objects seeded from ``seed``, and nothing iterates a set, so a
run is a pure function of its arguments.
"""

from __future__ import annotations

import heapq
import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import cbor2

from ubipy.membership import (
    MemberEvent,
    Membership,
    MembershipConfig,
    Message,
    Outgoing,
    message_from_wire,
)
from ubipy.wire import FrameType, FrameWriter, Gossip, new_epoch, secret_from

# IPv4 (20) and TCP with timestamps (32): peers keep a TCP connection to each other.
_IP_TCP = 52
# A segment's payload at an Ethernet MTU, TCP timestamps on.
_MSS = 1448


def frame_overhead(address: str) -> int:
    """What a membership message's frame adds to its CBOR body on the wire, measured
    on a real frame: IP and TCP, the length prefix, the frame's head (version, kind,
    sender and recipient ids, epoch, sequence number, time), the sender's address, the
    frame kinds it takes, and the authentication tag."""
    peer_id = "0123456789abcdef"
    writer = FrameWriter(secret_from("simnet"), peer_id, new_epoch())
    gossip = Gossip(address, None, (int(FrameType.SCOPE_ACK),))
    frame = writer.frame(FrameType.MEMBERSHIP, gossip.to_wire(), time.time(), to=peer_id)
    return _IP_TCP + len(frame) - len(cbor2.dumps(None))


# Counted per message on top of the CBOR body (an address of the simulator's form).
FRAME_OVERHEAD = frame_overhead("10.0.1.250:7070")


def on_wire(body: int, *, stream: bool) -> int:
    """The bytes a message of ``body`` CBOR bytes takes on the wire: one frame, and
    for a stream (a push-pull table) the IP and TCP headers of each further segment."""
    size = body + FRAME_OVERHEAD
    return size + _IP_TCP * ((size - _IP_TCP - 1) // _MSS) if stream else size


_TICK = 0
_DELIVER = 1


@dataclass(slots=True)
class SimNode:
    id: str
    address: str
    membership: Membership
    up: bool = True
    scheduled: float | None = None
    bytes_sent: int = 0  # datagrams only, as on the wire (`on_wire`)
    datagrams_sent: int = 0
    stream_bytes_sent: int = 0
    # Bytes sent by message type, as on the wire.
    bytes_by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(slots=True)
class Observed:
    """A member event as one node saw it."""

    at: float
    observer: str
    event: MemberEvent


@dataclass
class SimNet:
    seed: int
    config: MembershipConfig = field(default_factory=MembershipConfig)
    loss: float = 0.0
    latency: tuple[float, float] = (0.001, 0.005)
    count_bytes: bool = False
    # Send every message through to_wire, CBOR and message_from_wire.
    wire: bool = False
    # Called for every member event; return True to stop the run.
    on_event: Callable[[Observed], bool] | None = None

    now: float = 0.0
    nodes: dict[str, SimNode] = field(default_factory=dict)  # by address
    by_id: dict[str, SimNode] = field(default_factory=dict)
    _heap: list[tuple[float, int, int, str, str, Message | None, bool]] = field(
        default_factory=list
    )
    _seq: int = 0
    _stopped: bool = False
    # address -> the side of the current partition it is on (absent: no partition).
    _side: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._net_rng = random.Random(self.seed * 7919 + 1)
        self._id_rng = random.Random(self.seed * 7919 + 2)

    # -- setting up ------------------------------------------------------------

    def add_node(self, node_id: str | None = None, incarnation: int = 0) -> SimNode:
        """A new node, not yet joined, with a 16-hex id like a real peer's."""
        if node_id is None:
            node_id = f"{self._id_rng.getrandbits(64):016x}"
        address = f"10.0.{len(self.nodes) // 250}.{len(self.nodes) % 250 + 1}:7070"
        rng = random.Random(self._id_rng.getrandbits(64))
        membership = Membership(
            node_id, address, self.config, rng, now=self.now, incarnation=incarnation
        )
        node = SimNode(node_id, address, membership)
        self.nodes[address] = node
        self.by_id[node_id] = node
        self._reschedule(node)
        return node

    def restart(self, node: SimNode) -> SimNode:
        """The same id at the same address, with a fresh state machine (the driver
        persists nothing but the id)."""
        rng = random.Random(self._id_rng.getrandbits(64))
        node.membership = Membership(node.id, node.address, self.config, rng, now=self.now)
        node.up = True
        node.scheduled = None
        self._reschedule(node)
        return node

    def join(self, node: SimNode, seeds: list[SimNode]) -> None:
        self._send(node, node.membership.join(self.now, [s.address for s in seeds]))
        self._after(node)

    def leave(self, node: SimNode) -> None:
        self._send(node, node.membership.leave(self.now))
        self._after(node)

    def crash(self, node: SimNode) -> None:
        node.up = False

    def partition(self, *groups: list[SimNode]) -> None:
        """Cut the network between the groups (nodes in none are cut off from all):
        datagrams and streams across are lost, as on a real cut."""
        self._side = {node.address: i for i, group in enumerate(groups) for node in group}

    def heal(self) -> None:
        self._side = {}

    def cluster(self, n: int, *, spacing: float = 0.05) -> list[SimNode]:
        """``n`` nodes, each joining a random earlier one, run until all agree."""
        nodes = [self.add_node()]
        for _ in range(n - 1):
            self.run_for(spacing)
            node = self.add_node()
            self.join(node, [self._id_rng.choice(nodes)])
            nodes.append(node)
        everyone = frozenset(x.id for x in nodes)
        self.run_until(self.now + 60.0, lambda: self.agree(nodes, everyone), step=0.1)
        if not self.agree(nodes, everyone):
            raise AssertionError("the cluster did not converge")
        return nodes

    def agree(self, nodes: list[SimNode], ids: frozenset[str]) -> bool:
        return all(x.membership.alive_ids() == ids for x in nodes if x.up)

    # -- running ---------------------------------------------------------------

    def run_for(self, duration: float) -> None:
        self.run_until(self.now + duration)

    def run_until(
        self, end: float, condition: Callable[[], bool] | None = None, step: float = 1.0
    ) -> bool:
        """Run to ``end``, or until ``on_event`` asks to stop, or until
        ``condition`` (checked every ``step`` of virtual time) holds. True if
        stopped early."""
        self._stopped = False
        next_check = self.now + step
        heap = self._heap
        nodes = self.nodes
        while heap and heap[0][0] <= end:
            at, _, kind, address, sender, message, stream = heapq.heappop(heap)
            if condition is not None and at >= next_check:
                self.now = next_check
                if condition():
                    heapq.heappush(heap, (at, _, kind, address, sender, message, stream))
                    return True
                next_check += step
            self.now = at
            node = nodes[address]
            if not node.up:
                continue
            if kind == _TICK:
                if node.scheduled != at:
                    continue  # superseded by an earlier deadline
                node.scheduled = None
                out = node.membership.tick(at)
            else:
                assert message is not None
                out = node.membership.receive(at, sender, message)
            if out:
                self._send(node, out)
            self._after(node)
            if self._stopped:
                return True
        if condition is not None and condition():
            return True
        self.now = max(self.now, end)
        return False

    def _after(self, node: SimNode) -> None:
        membership = node.membership
        events = membership.drain_events()
        if events and self.on_event is not None:
            for event in events:
                if self.on_event(Observed(self.now, node.id, event)):
                    self._stopped = True
        self._reschedule(node)

    def _reschedule(self, node: SimNode) -> None:
        deadline = node.membership.next_deadline()
        if deadline is None:
            return
        deadline = max(deadline, self.now)
        if node.scheduled is None or deadline < node.scheduled:
            node.scheduled = deadline
            self._push(deadline, _TICK, node.address, "", None, False)

    def _push(
        self, at: float, kind: int, address: str, sender: str, message: Message | None, stream: bool
    ) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, address, sender, message, stream))

    def _send(self, node: SimNode, out: list[Outgoing]) -> None:
        rng = self._net_rng
        lo, hi = self.latency
        for o in out:
            message = o.message
            if self.count_bytes or self.wire:
                body = cbor2.dumps(message.to_wire())
                size = on_wire(len(body), stream=o.stream)
                if o.stream:
                    node.stream_bytes_sent += size
                else:
                    node.bytes_sent += size
                    node.datagrams_sent += 1
                kind = type(message).__name__
                node.bytes_by_kind[kind] = node.bytes_by_kind.get(kind, 0) + size
                if self.wire:
                    message = message_from_wire(cbor2.loads(body))
            if o.address not in self.nodes:
                continue
            if self._side and self._side.get(o.address, -1) != self._side.get(node.address, -2):
                continue
            if not o.stream and self.loss and rng.random() < self.loss:
                continue
            self._push(
                self.now + rng.uniform(lo, hi), _DELIVER, o.address, node.address, message, o.stream
            )
