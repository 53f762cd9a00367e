"""What a restart owes the hosts a shard's peer asked: each host's politeness mark
(when its last request ended, the wait after it, its pages spent). A part of
:class:`ubipy.store.shard.Shard` (a mixin over its connection).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Mapping
from contextlib import AbstractContextManager

from ubipy.store.rows import HostMark

__all__ = ["OwedMixin"]


class OwedMixin:
    """The shard's politeness marks (see the module's docstring)."""

    _conn: sqlite3.Connection

    def transaction(self) -> AbstractContextManager[None]:
        raise NotImplementedError

    def save_host_marks(self, marks: Mapping[str, HostMark]) -> None:
        """Remember, per host, when its last request ended, its delay and budget spent."""
        with self.transaction():
            self._conn.executemany(
                "INSERT INTO hosts (host, last_end, delay, pages) VALUES (?, ?, ?, ?) "
                "ON CONFLICT(host) DO UPDATE SET last_end = excluded.last_end, "
                "delay = excluded.delay, pages = excluded.pages",
                [(h, m.last_end, m.delay, m.pages) for h, m in marks.items()],
            )

    def host_mark(self, host: str) -> HostMark | None:
        row = self._conn.execute(
            "SELECT last_end, delay, pages FROM hosts WHERE host = ?", (host,)
        ).fetchone()
        return None if row is None else HostMark.from_row(row)

    def host_marks(self) -> dict[str, HostMark]:
        cur = self._conn.execute("SELECT host, last_end, delay, pages FROM hosts")
        return {str(row[0]): HostMark.from_row(row[1:]) for row in cur}
