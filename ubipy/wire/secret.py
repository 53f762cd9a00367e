"""The cluster secret: the HMAC key every frame is signed with."""

from __future__ import annotations

import hmac
import secrets
from typing import Final

#: The key used when no secret is configured. It is public, so a peer using it
#: must listen on loopback only.
LOOPBACK_SECRET: Final = "ubipy-loopback-only"
# Not versioned with PROTOCOL_VERSION on purpose: a peer speaking another version
# should get BAD_VERSION (a clear message) rather than BAD_TAG.
_KDF_LABEL: Final = b"ubipy/wire/hmac-key"


def _derive(secret: str) -> bytes:
    # Human secrets are short and low in entropy; one keyed hash at least turns them
    # into a uniform 32-byte key that is used for nothing but this wire.
    return hmac.digest(_KDF_LABEL, secret.encode("utf-8"), "sha256")


_DEFAULT_KEY: Final = _derive(LOOPBACK_SECRET)


def secret_from(value: str | None) -> bytes:
    """The wire key for ``--secret`` / ``UBIPY_SECRET``.

    None or "" (an unset or empty variable) gives the public loopback-only key.
    """
    return _derive(value or LOOPBACK_SECRET)


# Shorter than this, a secret is one a stranger on the peer port could guess.
SHORT_SECRET: Final = 12


def secret_doubt(value: str | None) -> str | None:
    """What looks wrong with a secret as given (QA: "abc\n" from a file against "abc"
    was only "the secrets differ"; " " and "x" were taken without a word, and lifted
    the loopback-only rule), or None."""
    if not value:
        return None
    if value != value.strip():
        return "it begins or ends with whitespace (a newline from a file?), which counts"
    if len(value) < SHORT_SECRET:
        return f"it is {len(value)} characters long: one a stranger could guess"
    return None


def is_default_secret(key: bytes) -> bool:
    """True for the public loopback key: the caller must then bind loopback only."""
    return hmac.compare_digest(key, _DEFAULT_KEY)


def new_epoch() -> int:
    """A random epoch for this process start (63 bits, never negative)."""
    return secrets.randbits(63)
