"""Every exception ubipy raises on purpose, in one tree (as httpx's ``_exceptions``)::

    UbipyError
    ├── WireError          a payload from another peer that is not a well-formed
    │                      message of its kind (also a ValueError)
    ├── FrameError         this peer asked for a frame the wire cannot carry: a bug
    │                      or an oversized request (also a ValueError)
    ├── ConfigError        a configuration option out of its range, of the wrong
    │                      type or unknown, from code, a flag or a config file
    │                      (also a ValueError)
    ├── ShardError         the shard cannot be opened or read as one: another
    │   │                  schema version, not SQLite, an unknown body codec, a
    │   │                  data directory that is not one (also a RuntimeError)
    │   └── DataDirInUse   another process holds the data directory's lock
    ├── StorageError       the shard refuses writes (disk full, read-only file);
    │   │                  the crawler pauses admission until it takes them again
    │   │                  (also a RuntimeError)
    │   └── _Refused       ubipy.store.shard: SQLite refused a transaction
    ├── ExportError        a shard cannot be exported or the output cannot be
    │   │                  opened; the message is one line (also a RuntimeError)
    │   └── ExportWriteError  the output failed while being written (disk full,
    │                      a closed pipe): what was written is incomplete
    ├── DemoDirError       ubipy.demo: the --data directory holds what the demo did
    │                      not make, or is not a directory (also a ValueError)
    ├── SeedsFileError     ubipy.fetch.seeds: a seeds file refused whole, binary or
    │                      too large to read (also a ValueError)
    ├── BadURL             ubipy.fetch: a URL normalisation refuses, with its
    │                      URLRejection (also a ValueError)
    ├── AddressRefused     ubipy.fetch.tunnel: a host's address is one a crawler
    │                      may not reach (loopback, private...) and was not allowed,
    │                      or the proxy refused it; nothing sent, never retried
    │                      (also an httpx2.ConnectError)
    ├── CertificateError   ubipy.fetch.transport: a server's TLS certificate did
    │                      not verify; recorded as such, never retried (also an
    │                      httpx2.ConnectError)
    ├── ProxyUnreachable   ubipy.fetch.transport: no connection to --proxy; the
    │   │                  request is put back, no host charged for it (also an
    │   │                  httpx2.ConnectError)
    │   └── OutOfSockets   no socket to be had (out of file descriptors): put back
    │                      as for a proxy down
    ├── ProtocolFailure    ubipy.fetch.http1: a server's bytes are not an HTTP/1.x
    │                      response that can be read (the transport raises it on as
    │                      an httpx2.RemoteProtocolError)
    ├── BadRequest         ubipy.fetch.http1: a request head that cannot be written
    │                      as it is, a header value with a line break (raised on as
    │                      an httpx2.LocalProtocolError)
    ├── BadCoding          ubipy.fetch.coding: a body that cannot be decoded from
    │                      the content codings its answer names (a coding not
    │                      decoded here, a stream cut short); a protocol error
    ├── RobotsFetchError   ubipy.fetch.robots: an event a robots.txt fetch cannot
    │                      take in its state, a caller's bug (also a RuntimeError)
    ├── EmptyRingError     ubipy.ring: a host looked up with no members, a
    │                      caller's bug (also a LookupError)
    └── NotOurs            ubipy.peer.handoff: a hand-off of a host this peer does
                           not own, refused to its sender (also a ValueError)

The errors other packages catch and handle are defined here. Those that carry a
package's own types (BadURL's URLRejection), that mean the caller has a bug, or
that never leave their package are defined with it, under a class of this tree.
The second bases are those the errors had before this tree: callers may catch
them by those too.

Callers catch what they can handle, by kind; anything else is a bug and is left
to propagate.
"""

from __future__ import annotations

__all__ = [
    "ConfigError",
    "DataDirInUse",
    "ExportError",
    "ExportWriteError",
    "FrameError",
    "ShardError",
    "StorageError",
    "UbipyError",
    "WireError",
    "naming_address",
]


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


class ShardError(UbipyError, RuntimeError):
    """The shard cannot be opened or read as one (wrong version, unreadable file)."""


class DataDirInUse(ShardError):
    """Another process (a peer) holds the data directory: two would share an id."""

    def __init__(self, data_dir: object, pid: int | None, address: str | None) -> None:
        holder = ", ".join(
            ([f"pid {pid}"] if pid is not None else [])
            + ([f"listening on {address}"] if address else [])
        )
        super().__init__(
            f"{data_dir} is in use by another peer{f' ({holder})' if holder else ''}; "
            "one data directory serves one peer at a time"
        )
        self.pid = pid
        self.address = address


class StorageError(UbipyError, RuntimeError):
    """The shard cannot be written (disk full, read-only): admission is paused."""


class ExportError(UbipyError, RuntimeError):
    """A shard cannot be read or the output cannot be written; the message is one line."""


class ExportWriteError(ExportError):
    """The output failed part-way (disk full, the reader of a pipe gone): unlike the
    other export errors, the command was right and the world refused it, so the
    command line exits 1 rather than 2."""


def naming_address(group: BaseExceptionGroup[OSError], flag: str, address: str) -> OSError:
    """The first of ``group``'s errors (a listener that could not start), naming the
    address it was met on: "address already in use" for --control read as the peer's
    own port taken, and the demo's said no address at all (QA)."""
    first: BaseException = group
    while isinstance(first, BaseExceptionGroup):
        first = first.exceptions[0]
    assert isinstance(first, OSError)
    return OSError(first.errno, f"{flag} {address}: {first.strerror or first}")
