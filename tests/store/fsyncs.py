"""What a test sees of the syncs a store makes."""

from __future__ import annotations

import os
from pathlib import Path

import pytest


def record_fsyncs(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of what ``os.fsync`` is called on from now on (files and directories),
    in order; each call still syncs."""
    names: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        names.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return names
