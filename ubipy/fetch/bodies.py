"""A response body's bytes kept up to a cap: the fetcher's one rule, whichever way a
body is read (:mod:`ubipy.fetch.transport`'s own, a coding undone, httpx2's)."""

from __future__ import annotations

__all__ = ["CappedBody"]


class CappedBody:
    """A body's pieces kept up to a cap: its first ``cap`` bytes, and whether more
    came. The fetcher's one rule, whichever way a body is read."""

    __slots__ = ("_cap", "_chunks", "_size", "truncated")

    def __init__(self, cap: int) -> None:
        self._cap = cap
        self._chunks: list[bytes] = []
        self._size = 0
        self.truncated = False

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
