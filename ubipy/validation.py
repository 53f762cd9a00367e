"""The checks every configuration section makes of its values, so that each says what
is wrong in the same words (``must be >= 0, not -1``), naming the option."""

from __future__ import annotations

import math

from ubipy.errors import ConfigError


def show(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else repr(value)


def at_least(section: object, low: int, *names: str, infinite: bool = False) -> None:
    """``infinite``: inf is a meaningful value of these (no cap), not a slip."""
    for name in names:
        value = getattr(section, name)
        # Written so that NaN fails too; None is "no limit".
        if value is not None and not value >= low:
            raise ConfigError(f"must be >= {low}, not {show(value)}", name)
        finite(value, name, f">= {low}", infinite)


def positive(section: object, *names: str) -> None:
    for name in names:
        value = getattr(section, name)
        if not value > 0:
            raise ConfigError(f"must be > 0, not {show(value)}", name)
        finite(value, name, "> 0", False)


def finite(value: object, name: str, bound: str, infinite: bool) -> None:
    if value == math.inf and not infinite:
        raise ConfigError(f"must be {bound} and finite, not inf", name)
