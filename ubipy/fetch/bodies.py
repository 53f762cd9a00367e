"""A response body's bytes kept up to a cap: the fetcher's one rule, whichever way a
body is read (:mod:`ubipy.fetch.transport`'s own, a coding undone, httpx2's).

A body may also have to wait for a turn once it is large (:class:`BodyGate`): a
sitemap may be read to 50 MB, held twice while it is, so only a few large ones are
read at once (QA: 40 hosts' gzip bombs at /sitemap.xml took 3.4 GB). Its first
megabyte needs none: most sitemaps (and every 404 at /sitemap.xml) are smaller, and a
turn asked before the request once held a broad crawl to 4 requests at a time (QA).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

__all__ = ["BodyGate", "CappedBody"]


class BodyGate:
    """Past ``small`` bytes, a body waits for ``turn`` (once) before more is read;
    :attr:`taken` says whether it did, for the caller to give the turn back."""

    __slots__ = ("small", "taken", "turn")

    def __init__(self, small: int, turn: Callable[[], Awaitable[object]]) -> None:
        self.small = small
        self.turn = turn
        self.taken = False


class CappedBody:
    """A body's pieces kept up to a cap: its first ``cap`` bytes, and whether more
    came. The fetcher's one rule, whichever way a body is read. With a ``gate``, the
    reader awaits :meth:`wait` whenever :attr:`waits` says so."""

    __slots__ = ("_cap", "_chunks", "_gate", "_size", "truncated")

    def __init__(self, cap: int, gate: BodyGate | None = None) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0
        self.truncated = False
        self._gate = gate

    @property
    def waits(self) -> bool:
        """Whether the body is past its gate's size without its turn yet."""
        gate = self._gate
        return gate is not None and not gate.taken and self._size > gate.small

    async def wait(self) -> None:
        """The gate's turn, before more of the body is read."""
        assert self._gate is not None
        await self._gate.turn()
        self._gate.taken = True

    def add(self, piece: bytes) -> bool:
        """Keep ``piece``, or its part within the cap; False once the cap is passed."""
        if self._size + len(piece) > self._cap:
            self._chunks.append(piece[: self._cap - self._size])
            self.truncated = True
            return False
        self._chunks.append(piece)
        self._size += len(piece)
        return True

    def result(self) -> tuple[bytes, bool]:
        """The bytes kept (one piece is returned as it is, not copied), and whether
        the cap cut the body."""
        return b"".join(self._chunks), self.truncated
