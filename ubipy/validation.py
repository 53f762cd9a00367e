"""The checks every configuration section makes of its values, so that each says what
is wrong in the same words (``must be >= 0, not -1``), naming the option."""

from __future__ import annotations

import math
import re

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


# What a value sent as it is in every request's head may hold: a non-ASCII one stopped
# the peer at its first request, one with a line break made every request fail.
# RFC 9110's field value, ASCII only (httpx2 sends headers as ASCII), not empty, no
# space at either end.
_IN_HEADS = re.compile(r"[\x21-\x7e](?:[\x20-\x7e\t]*[\x21-\x7e])?")
_TOKEN = re.compile(r"[\x21-\x7e]+")


def sent_in_heads(section: object, name: str, *, spaces: bool = True) -> None:
    """``section.name`` (unless None) is printable ASCII, with inner spaces or none."""
    value = getattr(section, name)
    if value is None or (_IN_HEADS if spaces else _TOKEN).fullmatch(value):
        return
    what = "(letters, digits, punctuation, spaces)" if spaces else "without spaces"
    raise ConfigError(f"must be printable ASCII {what}: {value!r}", name)
