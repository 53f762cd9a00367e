"""SURT keys, the ones pywb looks captures up by (``com,example)/path?a=1``).

pywb makes them with the ``surt`` package: the Internet Archive's canonicalisation
(Google's, then host, path and query rules) and the host's labels reversed. It is pure
Python, about 50 us a URL, and a peer makes one for each page it writes. The URLs a
crawler writes are nearly all plain (a normalised host name, a path and a query of
letters, digits and ``-._~=&``), and for those the rules come down to a few string
operations, done here; any other URL goes to ``surt`` itself. The two agree on every
plain URL (tests/store/test_surtkey.py compares them on generated URLs).
"""

from __future__ import annotations

import functools
import re
import warnings
from collections.abc import Callable
from typing import Final

__all__ = ["surt_key"]

# http(s)://host/path?query, every part plain: a host of DNS labels (its last one with
# a letter no IP form can hold), no port, no user, no fragment.
_PLAIN: Final = re.compile(
    r"https?://((?:[a-z0-9-]+\.)*[a-z0-9-]*[g-wyz][a-z0-9-]*)(/[A-Za-z0-9._~/-]*)(?:\?([A-Za-z0-9._~=&-]+))?"
)
# What would make the path or the query less than plain to the canonicaliser: an
# empty, "." or ".." segment (its path normalisation), a session id (its query rules).
_ODD_PATH: Final = re.compile(r"//|/\.\.?(?:/|$)")
_SESSION: Final = re.compile(r"sessionid|sessid|sid=|cfid=", re.IGNORECASE)
# A host's leading www, www2...: dropped from keys (IA's "host massage").
_WWW: Final = re.compile(r"www\d*\.")
_SPACE: Final = re.compile(r"\s")


@functools.cache
def _surt() -> Callable[[str], str]:
    # Imported when first wanted: surt brings tldextract and requests (0.17 s), which
    # a peer that never indexes should not pay for at start-up. surt 0.3.1's regular
    # expressions have invalid escapes: compiled from source (no .pyc written), they
    # warn (an error under -W error, a SyntaxWarning printed from Python 3.12 on).
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        warnings.simplefilter("ignore", SyntaxWarning)
        import surt

    made: Callable[[str], str] = surt.surt
    return made


def _plain_key(url: str) -> str | None:
    """The key of a plain URL, as ``surt`` makes it; None for any other URL."""
    found = _PLAIN.fullmatch(url)
    if found is None:
        return None
    host, path, query = found.groups()
    if _ODD_PATH.search(path) or (query is not None and _SESSION.search(query)):
        return None
    if (www := _WWW.match(host)) is not None:
        host = host[www.end() :]
    path = path.lower()
    if len(path) > 1 and path.endswith("/"):
        path = path[:-1]
    key = ",".join(reversed(host.split("."))) + ")" + path
    if query:
        # Lowercased, then its arguments in order (of name, then value: as tuples).
        args = sorted(tuple(arg.split("=", 1)) for arg in query.lower().split("&"))
        key += "?" + "&".join("=".join(arg) for arg in args)
    return key


def surt_key(url: str) -> str | None:
    """The SURT key pywb looks ``url`` up by, or None when there is none."""
    key = _plain_key(url)
    if key is not None:
        return key
    try:
        key = _surt()(url)
    except Exception:  # surt raises whatever its parsing meets on a broken URL
        return url if url.startswith("urn:") else None  # as pywb: a URN is its own key
    # A key is one field of a space-separated line.
    return key if key and not _SPACE.search(key) else None
