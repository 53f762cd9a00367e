"""Every exception ubipy raises on purpose, in one tree (as httpx's ``_exceptions``)::

    UbipyError
    ├── WireError          a payload from another peer that is not a well-formed
    │                      message of its kind (also a ValueError)
    ├── FrameError         this peer asked for a frame the wire cannot carry: a bug
    │                      or an oversized request (also a ValueError)
    └── ...

Callers catch what they can handle, by kind; anything else is a bug and is left
to propagate.
"""

from __future__ import annotations

__all__ = ["FrameError", "UbipyError", "WireError"]


class UbipyError(Exception):
    """The root of every error ubipy raises on purpose."""


class WireError(UbipyError, ValueError):
    """A payload from another peer that is not a well-formed message of its kind."""


class FrameError(UbipyError, ValueError):
    """This peer asked the writer for a frame the wire cannot carry."""
