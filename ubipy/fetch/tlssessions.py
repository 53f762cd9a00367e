"""TLS sessions kept and resumed without CPython's copies.

CPython's :mod:`ssl` copies a session each time one is read from a connection or
given to one: it serialises the session and parses it back (``_ssl_session_dup``, a
workaround for an OpenSSL 1.1.0 bug), which parses the server's certificate again.
Under OpenSSL 3.0 that costs 0.35-0.5 ms a time, as much as the resumed handshake
itself: over a crawl whose servers close their connections every 5 requests, a fifth
of what HTTPS costs above plain HTTP.

OpenSSL has a copy that parses nothing, ``SSL_SESSION_dup``. This module reaches the
``SSL *`` under an :class:`ssl.SSLObject` as sslkeylog and SABnzbd's sabctools do (the
C object begins ``PyObject_HEAD; PyObject *Socket; SSL *ssl``, unchanged from Python
3.8 to 3.15) and calls OpenSSL's public functions on it through :mod:`ctypes`. The
layout is checked once per process, on a probe connection: OpenSSL's application data
of the ``SSL`` found must be the Python object, as CPython sets it. Where anything
differs (another Python, a version not known here, an OpenSSL whose functions cannot
be found through the ``_ssl`` module, as is likely on Windows: not tried), :mod:`ssl`'s
own session objects are used, copies and all; the connections behave the same.

Each connection is given a copy of the kept session, never the kept one: OpenSSL marks
a connection's session unusable when the connection is freed without TLS's
close_notify, which is how the transport closes them.
"""

from __future__ import annotations

import ctypes
import functools
import logging
import ssl
import sys
from collections.abc import Callable
from typing import Any, Final

__all__ = ["TlsSession", "fast_sessions", "resume", "session_of"]

_log = logging.getLogger(__name__)

# Python versions whose _ssl object layout is known (see the docstring).
_KNOWN_PYTHONS: Final = ((3, 8), (3, 15))
_PROBE_NAME: Final = "probe.ubipy.invalid"


class _OpenSsl:
    """The few libssl functions used, typed for ctypes."""

    def __init__(self, lib: ctypes.CDLL) -> None:
        p, i = ctypes.c_void_p, ctypes.c_int
        self.get_ex_data = _function(lib, "SSL_get_ex_data", p, [p, i])
        self.get_session = _function(lib, "SSL_get_session", p, [p])
        self.set_session = _function(lib, "SSL_set_session", i, [p, p])
        self.session_dup = _function(lib, "SSL_SESSION_dup", p, [p])
        self.session_free = _function(lib, "SSL_SESSION_free", None, [p])
        self.session_is_resumable = _function(lib, "SSL_SESSION_is_resumable", i, [p])


def _function(
    lib: ctypes.CDLL, name: str, restype: type[Any] | None, argtypes: list[type[Any]]
) -> Callable[..., Any]:
    fn = lib[name]
    fn.restype = restype
    fn.argtypes = argtypes
    return fn


class TlsSession:
    """A TLS session kept for resumption: OpenSSL's own (freed with this object) or,
    without the fast path, :mod:`ssl`'s."""

    __slots__ = ("_lib", "_pointer", "_stdlib")

    def __init__(
        self,
        pointer: int | None = None,
        lib: _OpenSsl | None = None,
        stdlib: ssl.SSLSession | None = None,
    ) -> None:
        self._pointer = pointer
        self._lib = lib
        self._stdlib = stdlib

    def __del__(self) -> None:
        if self._pointer is not None and self._lib is not None:
            self._lib.session_free(self._pointer)
            self._pointer = None


def _ssl_pointer(tls: ssl.SSLObject) -> int | None:
    """The ``SSL *`` under ``tls`` (the pointer after the object's header and its
    ``Socket`` field)."""
    inner = getattr(tls, "_sslobj")  # noqa: B009 (private: not in the type stubs)
    offset = object.__basicsize__ + ctypes.sizeof(ctypes.c_void_p)
    return ctypes.c_void_p.from_address(id(inner) + offset).value


@functools.cache
def _openssl() -> _OpenSsl | None:
    """libssl's functions when the layout checks out, else None (logged once)."""
    if sys.implementation.name != "cpython" or not (
        _KNOWN_PYTHONS[0] <= sys.version_info[:2] <= _KNOWN_PYTHONS[1]
    ):
        return None
    if ssl.OPENSSL_VERSION_INFO < (1, 1, 1):
        return None
    import _ssl

    try:
        lib = _OpenSsl(ctypes.CDLL(_ssl.__file__))
    except (OSError, AttributeError) as exc:
        _log.info("TLS sessions: OpenSSL's functions not reachable (%s); using ssl's", exc)
        return None
    # A bare client context: a default one would load the CA store (tens of ms).
    probe = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT).wrap_bio(
        ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname=_PROBE_NAME
    )
    pointer = _ssl_pointer(probe)
    app_data = None if not pointer else lib.get_ex_data(pointer, 0)
    if app_data != id(getattr(probe, "_sslobj")):  # noqa: B009
        _log.info("TLS sessions: this Python's ssl objects are not as expected; using ssl's")
        return None
    return lib


def fast_sessions() -> bool:
    """Whether sessions are read and given without CPython's copies here."""
    return _openssl() is not None


def session_of(tls: ssl.SSLObject) -> TlsSession | None:
    """The session of ``tls`` (after its handshake), to resume later connections
    with; None when there is none to resume."""
    lib = _openssl()
    if lib is None:
        stdlib = tls.session
        return None if stdlib is None else TlsSession(stdlib=stdlib)
    pointer = _ssl_pointer(tls)
    session = lib.get_session(pointer) if pointer else None
    if not session or not lib.session_is_resumable(session):
        return None
    copy = lib.session_dup(session)
    return TlsSession(pointer=copy, lib=lib) if copy else None


def resume(tls: ssl.SSLObject, session: TlsSession) -> None:
    """Offer ``session`` in the handshake ``tls`` is about to make."""
    if session._stdlib is not None:
        tls.session = session._stdlib
        return
    lib = session._lib
    pointer = _ssl_pointer(tls)
    if lib is None or session._pointer is None or not pointer:
        return
    copy = lib.session_dup(session._pointer)
    if copy:
        lib.set_session(pointer, copy)
        lib.session_free(copy)  # the connection holds its own reference
