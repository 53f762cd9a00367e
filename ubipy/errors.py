"""Every exception ubipy raises on purpose, in one tree (as httpx's ``_exceptions``)::

    UbipyError
    ├── WireError          a payload from another peer that is not a well-formed
    │                      message of its kind (also a ValueError)
    ├── FrameError         this peer asked for a frame the wire cannot carry: a bug
    │                      or an oversized request (also a ValueError)
    ├── ConfigError        a configuration option out of its range, of the wrong
    │                      type or unknown, from code, a flag or a config file
    │                      (also a ValueError)
    └── ...

Callers catch what they can handle, by kind; anything else is a bug and is left
to propagate.
"""

from __future__ import annotations

__all__ = ["ConfigError", "FrameError", "UbipyError", "WireError"]


class UbipyError(Exception):
    """The root of every error ubipy raises on purpose."""


class WireError(UbipyError, ValueError):
    """A payload from another peer that is not a well-formed message of its kind."""


class FrameError(UbipyError, ValueError):
    """This peer asked the writer for a frame the wire cannot carry."""


class ConfigError(UbipyError, ValueError):
    """A configuration option out of its range, of the wrong type, or unknown.

    ``option`` names it as the configuration does (``politeness.delay``), so that
    the command line can name it as the user wrote it (``--delay``, or the key in
    the config file); ``problem`` is the rest of the sentence."""

    def __init__(self, problem: str, option: str | None = None) -> None:
        super().__init__(f"{option} {problem}" if option else problem)
        self.problem = problem
        self.option = option

    def within(self, section: str) -> ConfigError:
        """The same error, its option named from the configuration's top."""
        option = f"{section}.{self.option}" if section and self.option else self.option
        return ConfigError(self.problem, option)
