"""The server's record of every request: the evidence the referee judges a crawl by."""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

import trio

_PEER = re.compile(r"peer=([A-Za-z0-9_.:\-]+)")


def peer_from(user_agent: str, address: str) -> str:
    """The `peer=TOKEN` of a ubipy User-Agent, else the client's source address."""
    m = _PEER.search(user_agent)
    return m.group(1) if m else address


# Request.outcome values. Anything but COMPLETE is a response the client never got whole:
# asking again afterwards is a retry, not a duplicate.
COMPLETE = "complete"  # the whole response was handed to the OS
ABANDONED = "abandoned"  # the client went away first (time-out, size cap, hang-up)
RESET = "reset"  # the server reset the connection on purpose (status 0)
CUT = "cut"  # the server closed mid-body on purpose (the slow server's end)
OUTCOMES = (COMPLETE, ABANDONED, RESET, CUT)


@dataclass(frozen=True, slots=True)
class Request:
    """One request as the server saw it. Times are `trio.current_time()`: `start` when the
    request head was read, `end` when the last byte of the response was handed to the OS,
    or, for a response never completed, when the server noticed the client go (or cut it).

    `status` is the status line actually sent; 0 when none was (a hang or a reset).
    `retry_after` is the Retry-After header sent, if any, and `clock_offset` is wall time
    minus trio time when the entry was made, to map an HTTP-date onto `start`/`end`."""

    start: float
    end: float
    host: str  # lower-case, without :80
    target_path: str  # path and query exactly as requested
    status: int
    user_agent: str
    peer: str
    bytes_sent: int
    method: str = "GET"
    outcome: str = COMPLETE
    retry_after: str = ""
    clock_offset: float = 0.0

    @property
    def url(self) -> str:
        return f"http://{self.host}{self.target_path}"

    @property
    def complete(self) -> bool:
        return self.outcome == COMPLETE


class RequestLog:
    """An append-only list of requests that tasks can wait on."""

    def __init__(self, entries: Iterable[Request] = ()) -> None:
        self.entries: list[Request] = list(entries)
        self._changed: trio.Event | None = None

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[Request]:
        return iter(self.entries)

    def append(self, request: Request) -> None:
        self.entries.append(request)
        # An Event per generation: waiters wake, re-check their predicate, wait again.
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    async def wait_for(self, predicate: Callable[[RequestLog], bool]) -> None:
        """Return once `predicate(self)` holds (checked now and after every append).
        Bound it with `trio.fail_after`."""
        while not predicate(self):
            if self._changed is None:
                self._changed = trio.Event()
            await self._changed.wait()

    async def wait_for_count(self, n: int) -> None:
        await self.wait_for(lambda log: len(log.entries) >= n)

    def for_host(self, host: str) -> list[Request]:
        return [r for r in self.entries if r.host == host]

    def to_jsonl(self, path: str | Path) -> None:
        with open(path, "w", encoding="utf-8") as f:
            for r in self.entries:
                f.write(json.dumps(asdict(r), sort_keys=True) + "\n")

    @classmethod
    def from_jsonl(cls, path: str | Path) -> RequestLog:
        with open(path, encoding="utf-8") as f:
            return cls(Request(**json.loads(line)) for line in f if line.strip())
