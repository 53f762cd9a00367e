"""TLS for the transport: one verifying context per process, and a lean TLS stream.

:class:`trio.SSLStream` is made for any number of tasks sending and receiving at once:
every operation goes through two locks and two checkpoints, and every attribute it
sets goes through a forwarding ``__setattr__``. The transport uses a connection from
one task at a time (a request is sent, then its answer read), so :class:`TlsStream`
drives the same :class:`ssl.SSLObject` over memory BIOs without them: a read that the
buffered records can answer costs one call into OpenSSL, a write one ``send``, and an
answer whose records have come is read at once, as over plain TCP
(:meth:`TlsStream.receive_now`, :mod:`ubipy.fetch.sockets`). Over a
crawl where servers close their connections every 5 requests, trio's stream made
HTTPS cost 1.45 times plain HTTP's CPU per page, this one about 1.25 times, and
1.13-1.17 with the sessions below (the crawl alone 1.18; docs/performance.md): most
of the rest is OpenSSL 3.0's handshake.

Sessions are resumed (:attr:`TlsStream.session`, given back to a new stream): a
resumed handshake skips the certificate's parsing and verification, 0.45 ms of the
client's CPU against 1.1 for a full one (an ECDSA certificate, OpenSSL 3.0), once
sessions are read and given without CPython's copies (:mod:`ubipy.fetch.tlssessions`;
with them, 0.9 ms).
"""

from __future__ import annotations

import functools
import os
import re
import ssl
import sys
from pathlib import Path

import trio

from ubipy.fetch.sockets import DirectSocketStream
from ubipy.fetch.tlssessions import TlsSession, resume, session_of

__all__ = ["TlsStream", "certificate_failure", "system_ca_directory", "tls_context"]

_READ_SIZE = 65_536
# A CA directory's entry as c_rehash and update-ca-certificates name them: the
# subject's hash, then which of the certificates with that hash.
_HASHED = re.compile(r"[0-9a-f]{8}\.[0-9]+")
_PEM_CERTIFICATES = (b"-----BEGIN CERTIFICATE-----", b"-----BEGIN TRUSTED CERTIFICATE-----")


@functools.cache
def tls_context(ca_bundle: Path | None = None) -> ssl.SSLContext:
    """The verifying client context, made once per process (per CA bundle): the
    system's CAs, plus those in ``ca_bundle`` (a PEM file) when given.

    The system's CAs are read from its hashed CA directory when that directory
    holds them all (:func:`system_ca_directory`): OpenSSL then reads a CA from it
    when a chain first needs it, where loading the CA file parses every one of
    them at once: 30 ms of CPU for Debian's 144 (OpenSSL 3.0), as much as 200
    resumed handshakes."""
    # capath None: the default context's own CAs. Otherwise its settings, the same CAs.
    ctx = ssl.create_default_context(capath=system_ca_directory())
    if ca_bundle is not None:
        ctx.load_verify_locations(cafile=ca_bundle)
    return ctx


def system_ca_directory() -> str | None:
    """The system's CA directory (OpenSSL's default, or ``SSL_CERT_DIR``) when it
    holds every CA of the system's CA file, else None: the file is then loaded
    as the default context loads it.

    Debian, Ubuntu and Alpine write both from one list (update-ca-certificates):
    the file among the directory's hashed links to each certificate. The
    directory is taken for the file only there, when the file lies in it and it
    has at least as many hashed entries as the file has certificates: a CA
    added to the file by hand, or a ``SSL_CERT_FILE`` elsewhere, keeps the file.
    Windows's store is read by the default context alone."""
    if sys.platform == "win32":
        return None
    paths = ssl.get_default_verify_paths()
    directory = paths.capath
    if directory is None or not os.path.isdir(directory):
        return None
    if paths.cafile is None:
        return directory  # the directory is all the default context has
    if os.path.dirname(os.path.realpath(paths.cafile)) != os.path.realpath(directory):
        return None
    try:
        pem = Path(paths.cafile).read_bytes()
        hashed = sum(1 for name in os.listdir(directory) if _HASHED.fullmatch(name))
    except OSError:
        return None
    certificates = sum(pem.count(begin) for begin in _PEM_CERTIFICATES)
    return directory if hashed >= certificates else None


def certificate_failure(exc: BaseException) -> ssl.SSLCertVerificationError | None:
    """The verification failure behind ``exc`` (trio and httpcore wrap it), if that
    is what it was."""
    seen = 0
    cause: BaseException | None = exc
    while cause is not None and seen < 8:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return cause
        cause = cause.__cause__ or cause.__context__
        seen += 1
    return None


class TlsStream(trio.abc.Stream):
    """A TLS client over ``transport``, for one task at a time. Call
    :meth:`do_handshake` first. A connection closed without TLS's close_notify
    reads as an end of stream, as browsers take it (HTTP's own framing tells a
    truncated answer)."""

    def __init__(
        self,
        transport: trio.abc.Stream,
        context: ssl.SSLContext,
        server_hostname: str,
        session: TlsSession | None = None,
    ) -> None:
        self.transport_stream = transport
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(
            self._incoming, self._outgoing, server_side=False, server_hostname=server_hostname
        )
        if session is not None:
            resume(self._tls, session)
        self._ended = False  # the end read: close_notify, or the socket's end
        # Plain TCP below (a tunnel through a proxy is too): read at once when it can.
        self._direct = transport if isinstance(transport, DirectSocketStream) else None

    @property
    def session(self) -> TlsSession | None:
        """The TLS session (its ticket), for a later connection to resume: a copy at
        each read."""
        return session_of(self._tls)

    @property
    def ended(self) -> bool:
        """Whether the end has been read (close_notify, or the socket's end)."""
        return self._ended

    @property
    def session_reused(self) -> bool:
        return self._tls.session_reused

    async def do_handshake(self) -> None:
        """Handshake; the certificate's failure is raised as
        :class:`ssl.SSLCertVerificationError`."""
        while True:
            try:
                self._tls.do_handshake()
            except ssl.SSLWantReadError:
                await self._flush()
                await self._fill()
                continue
            # What the handshake leaves to send (TLS 1.3's Finished) goes with the
            # request: one send less per connection (a receive sends it first).
            return

    async def receive_some(self, max_bytes: int | None = None) -> bytes:
        size = _READ_SIZE if max_bytes is None else max_bytes
        data = self.receive_now(size)
        if data is None:
            return await self.receive_later(size)
        # Answered at once: still a checkpoint, as a stream's receive must be, without
        # a trip through the scheduler unless the task is being cancelled.
        await trio.lowlevel.checkpoint_if_cancelled()
        return data

    def receive_now(self, max_bytes: int = _READ_SIZE) -> bytes | None:
        """Plaintext at once, from records already received or those the socket has
        now (b"" at the end), or None if a receive would wait. As
        :meth:`DirectSocketStream.receive_now`, not a checkpoint."""
        if self._ended:
            return b""
        # What TLS has to send (a renegotiation's answer) goes before a wait, in
        # receive_later: what has come is read first.
        incoming = self._incoming
        if not (incoming.pending or incoming.eof or self._tls.pending()):
            # Nothing buffered: a read would only raise SSLWantReadError, which
            # costs more than the read (the answer's usual first call).
            if self._direct is None:
                return None
            raw = self._direct.receive_now(_READ_SIZE)
            if raw is None:
                return None
            if raw:
                incoming.write(raw)
            else:
                incoming.write_eof()
        return self._read(max_bytes)

    async def receive_later(self, max_bytes: int = _READ_SIZE) -> bytes:
        """Plaintext once the socket has given enough: for a caller that has just
        found none at once (:meth:`receive_now`)."""
        while True:
            await self._flush()
            if not await self._fill():
                return b""
            data = self._read(max_bytes)
            if data is not None:
                return data

    def _read(self, size: int) -> bytes | None:
        """Decrypt what the records received so far hold, up to ``size`` bytes; None
        when they end inside a record (or TLS 1.3 wants to answer something)."""
        try:
            data = self._tls.read(size)
        except ssl.SSLWantReadError:
            return None
        except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
            data = b""
        except ssl.SSLError as exc:
            raise trio.BrokenResourceError(f"TLS: {exc}") from exc
        if not data:
            # close_notify (which CPython may read as b"") or the socket's end without
            # one: the end, from now on at once.
            self._ended = True
            return data
        # A read gives one record (16 KiB at most): what else has arrived is taken
        # too, so a page costs one trip up to the caller, not one a record.
        incoming = self._incoming
        while incoming.pending and len(data) < size:
            try:
                more = self._tls.read(size - len(data))
            except (ssl.SSLZeroReturnError, ssl.SSLEOFError):
                more = b""
            except ssl.SSLError:
                break  # a part of a record (or its end): the next call's
            if not more:
                # close_notify, the next call's end of stream. OpenSSL takes nothing
                # after it: bytes a server sent behind it stay pending, and reading
                # on would never end.
                self._ended = True
                break
            data += more
        return data

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if data:
            try:
                self._tls.write(data)
            except ssl.SSLError as exc:
                raise trio.BrokenResourceError(f"TLS: {exc}") from exc
        await self._flush()

    async def wait_send_all_might_not_block(self) -> None:
        await self.transport_stream.wait_send_all_might_not_block()

    async def aclose(self) -> None:
        # No close_notify: the transport closes a connection only when done with it
        # (or broken), and a server does not wait for one.
        await self.transport_stream.aclose()

    async def _flush(self) -> None:
        if self._outgoing.pending:
            await self.transport_stream.send_all(self._outgoing.read())

    async def _fill(self) -> bool:
        """Encrypted bytes from the socket into the TLS object; False at the end."""
        if self._direct is None:
            data = await self.transport_stream.receive_some(_READ_SIZE)
        else:
            data = await self._direct.receive_later(_READ_SIZE)
        if not data:
            self._incoming.write_eof()
            return False
        self._incoming.write(data)
        return True
