"""What waits to go to one replica successor, grouped by host, and how it is cut into
REPLICA frames (:mod:`ubipy.peer.replica` sends them)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass, field

from ubipy.peer.router import mark_from_wire, mark_to_wire
from ubipy.store import FrontierRow, HostMark, NewURL
from ubipy.wire import HostCopy, WireURL

__all__ = ["CHUNK", "CHUNK_BYTES", "HostCopies", "Outgoing", "pieces"]

# Entries (URLs plus fingerprints) per REPLICA frame: far under the 10,000 items a
# peer accepts in one list; and the characters of its URLs, half the 4 MiB frame cap
# (2,000 URLs of 2,048 characters would not fit).
CHUNK = 2_000
CHUNK_BYTES = 2 * 1024 * 1024


@dataclass(slots=True)
class HostCopies:
    pending: list[WireURL] = field(default_factory=list)
    done: list[int] = field(default_factory=list)
    mark: HostMark | None = None
    # It holds the outcome of the host's last request (see Replicator._held): the
    # acknowledgement of its frame releases the host.
    carries: bool = False


class Outgoing:
    """What is waiting to go to one successor, grouped by host."""

    __slots__ = ("hosts", "size")

    def __init__(self) -> None:
        self.hosts: dict[str, HostCopies] = defaultdict(HostCopies)
        self.size = 0

    def add(
        self,
        host: str,
        pending: Sequence[NewURL | FrontierRow] = (),
        done: Sequence[int] = (),
        mark: HostMark | None = None,
        *,
        carries: bool = False,
    ) -> None:
        copy = self.hosts[host]
        copy.carries |= carries
        copy.pending.extend((u.url, u.depth, 0.0) for u in pending)  # scores are not kept
        copy.done.extend(done)
        if mark is not None and (copy.mark is None or copy.mark.last_end <= mark.last_end):
            copy.mark = mark
        self.size += len(pending) + len(done)

    def discard(self, host: str) -> None:
        """Forget what is waiting for ``host`` (a newer read of it replaces it)."""
        copy = self.hosts.pop(host, None)
        if copy is not None:
            self.size -= len(copy.pending) + len(copy.done)

    def put_back(self, entries: Sequence[HostCopy], carrying: Collection[str] = ()) -> None:
        """Entries of a frame that was not sent (as :meth:`frames` made them), and the
        hosts whose last request's outcome they hold."""
        for entry in entries:
            copy = self.hosts[entry.host]
            copy.carries |= entry.host in carrying
            copy.pending.extend(entry.pending)
            copy.done.extend(entry.done)
            if entry.mark is not None:
                self.add(entry.host, mark=mark_from_wire(entry.mark))
            self.size += len(entry.pending) + len(entry.done)

    def frames(self, floor: float) -> Iterator[tuple[list[HostCopy], int, list[str]]]:
        """Frames' host entries, at most about CHUNK each and CHUNK_BYTES of URLs,
        with their entry count (the URLs and fingerprints; a mark rides with its
        host's first entry) and the hosts whose copies carry their last request's
        outcome (in the frame of their last piece). A host entry with a mark alone
        weighs one: weighing nothing, 10,001 of them made one frame its receiver
        refuses, which its sender now refuses to write (FrameError), and the peer died
        of it (found by a review). ``floor``: the sender's --delay, for the marks."""
        frame: list[HostCopy] = []
        carrying: list[str] = []
        count = weight = size = 0
        for host, copy in self.hosts.items():
            for n, (pending, done, urls) in enumerate(pieces(copy.pending, copy.done)):
                entries = len(pending) + len(done)
                if weight and (weight + max(entries, 1) > CHUNK or size + urls > CHUNK_BYTES):
                    yield frame, count, carrying
                    frame, carrying, count, weight, size = [], [], 0, 0, 0
                mark = None
                if n == 0 and copy.mark is not None:
                    mark = mark_to_wire(copy.mark, floor)
                frame.append(HostCopy(host, pending, done, mark))
                count += entries
                weight += max(entries, 1)
                size += urls
            if copy.carries:
                carrying.append(host)
        if frame:
            yield frame, count, carrying


def pieces(
    pending: Sequence[WireURL], done: Sequence[int]
) -> Iterator[tuple[tuple[WireURL, ...], tuple[int, ...], int]]:
    """A host's URLs and fingerprints in pieces of at most CHUNK URLs and CHUNK
    fingerprints, and CHUNK_BYTES of URLs, with those bytes; one piece at least, so
    that a mark alone still goes. (A hand-off's frames are cut so too.)"""
    i = j = 0
    while True:
        end, size = i, 0
        while end < len(pending) and end - i < CHUNK:
            length = len(pending[end][0])
            if end > i and size + length > CHUNK_BYTES:
                break
            size += length
            end += 1
        yield tuple(pending[i:end]), tuple(done[j : j + CHUNK]), size
        i, j = end, j + CHUNK
        if i >= len(pending) and j >= len(done):
            return
