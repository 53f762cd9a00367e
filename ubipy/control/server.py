"""The control centre's HTTP side: dashboard, status JSON, Prometheus metrics, seed and stop.

Started in the peer's nursery by
``address = await nursery.start(serve_control, backend, "127.0.0.1:8000")``. It
binds loopback unless told ``public=True``. Reading is open to whoever can reach
it; ``POST /api/seed`` and ``POST /api/stop`` need the cluster secret as a bearer
token, and without it the backend is not called at all. A source (an address; an IPv6
one by its /64; every loopback address one) that sends a wrong secret AUTH_STRIKES
times within AUTH_WINDOW is
answered 429 for AUTH_PENALTY, its tokens not even looked at, as the peer port bars a
source whose connections keep failing to authenticate; the failures are logged, a line
a second per source at most.

The peer is reached only through :class:`ControlBackend`. The figures go into a
:class:`~ubipy.control.figures.FiguresBook` sampled on a fixed beat, so the
chart's history does not depend on anyone having the dashboard open.
"""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import trio

from ubipy.control import metrics
from ubipy.control.figures import FiguresBook, snapshot
from ubipy.control.httpserver import (
    JSON_TYPE,
    Answer,
    HttpLimits,
    HttpServer,
    Request,
    error,
    json_answer,
)
from ubipy.control.page import CONTENT_SECURITY_POLICY, PAGE
from ubipy.fetch import parse_seeds
from ubipy.net import SourceLog, Strikes, TcpNetwork, is_loopback, join_address, split_address
from ubipy.wire import LOOPBACK_SECRET, is_default_secret, secret_from

log = logging.getLogger(__name__)

# The token is the cluster secret itself: it must not be guessed at the speed of the
# loopback (thousands a second). A person mistyping it a few times is not turned away;
# a program guessing gets some eight tries in two minutes.
AUTH_STRIKES: Final = 8
AUTH_WINDOW: Final = 60.0
AUTH_PENALTY: Final = 60.0


class ControlBackend(Protocol):
    """What the control server needs of a peer. Every method is called from trio and
    must not block; one with asynchronous work to do starts it in its own nursery."""

    @property
    def secret(self) -> bytes:
        """The cluster's wire key, ``secret_from(--secret)``. A bearer token is
        accepted when ``secret_from(token)`` equals it (a plain attribute will do)."""
        ...

    def cluster_view(self) -> Mapping[str, Mapping[str, Any]]:
        """Every member by peer id: ``{"address", "state"}`` (state as MemberState's
        name in lower case) and, once it has reported, its latest figures in the shape
        of ``PeerStatus.as_json()``. This peer's own entry should be current."""
        ...

    async def seed(self, urls: list[str]) -> Mapping[str, Any]:
        """Seed the crawl; return once what it admitted is on disk. Raise ValueError
        for input it refuses; a result holding an ``"error"`` key means it cannot take
        seeds now (answered 503)."""
        ...

    def stop_cluster(self) -> None:
        """Begin a graceful stop of every peer; return at once."""
        ...


@dataclass(frozen=True, slots=True)
class ControlLimits:
    http: HttpLimits = field(default_factory=HttpLimits)
    # The chart's beat and span, in seconds.
    sample_interval: float = 1.0
    history: float = 300.0


_ROUTES: Final = {
    "/": ("GET", "HEAD"),
    "/api/status": ("GET", "HEAD"),
    "/metrics": ("GET", "HEAD"),
    "/api/seed": ("POST",),
    "/api/stop": ("POST",),
}
_PAGE_HEADERS: Final = (
    ("Content-Security-Policy", CONTENT_SECURITY_POLICY),
    ("Referrer-Policy", "no-referrer"),
    ("X-Frame-Options", "DENY"),
)


def _host_of(header: str) -> str:
    """The host of a Host header, without port or IPv6 brackets."""
    if header.startswith("["):
        return header[1:].partition("]")[0]
    host, sep, port = header.rpartition(":")
    return host if sep and port.isdigit() else header


class ControlServer:
    """The routes, over one backend and one book of figures."""

    def __init__(self, backend: ControlBackend, *, public: bool, limits: ControlLimits) -> None:
        self.backend = backend
        self.public = public
        self.limits = limits
        self.book = FiguresBook(history=limits.history, resolution=limits.sample_interval)
        # No trust for a source that authenticated: on loopback every client is one
        # source, and a guesser there would go unthrottled after each good request.
        self._strikes = Strikes(AUTH_STRIKES, AUTH_WINDOW, AUTH_PENALTY, trust=0.0)
        self._auth_log = SourceLog()

    def observe(self) -> None:
        self.book.update(self.backend.cluster_view(), trio.current_time())

    async def sample_forever(self) -> None:
        beat = trio.current_time()
        while True:
            try:
                self.observe()
            except Exception:
                # A fault in the backend must not stop the chart for good.
                log.exception("control: the cluster view failed")
            self.book.sample(trio.current_time())
            # A fixed grid, so points stay a beat apart whatever a sample cost; after
            # a stall the missed beats are skipped rather than made up at once.
            beat = max(beat + self.limits.sample_interval, trio.current_time())
            await trio.sleep_until(beat)

    def screen(self, request: Request) -> Answer | None:
        """The refusal a request's head alone earns (its body not read yet: a stranger's
        megabyte costs nothing), else None."""
        if not self.public and not _host_allowed(request.headers.get("host")):
            # A loopback server answers only to loopback names: a web page whose
            # name was rebound to 127.0.0.1 must not read the cluster's figures.
            return error(403, "this control endpoint answers to loopback names only")
        allowed = _ROUTES.get(request.path)
        if allowed is None:
            # Not the whole path back: a stranger's 15 KB came back whole (QA).
            return error(404, f"no such resource: {request.path[:100]}")
        if request.method not in allowed:
            return error(405, "method not allowed", headers=(("Allow", ", ".join(allowed)),))
        if request.method in ("GET", "HEAD") and _announces_body(request.headers):
            # Nothing here reads a GET's body: a stranger's megabyte on each of the 64
            # connections was read and held all the same (found by a review).
            return error(413, f"{request.method} {request.path} takes no body")
        if request.path in ("/api/seed", "/api/stop"):
            return self._refuse_unless_authorised(request)
        return None

    async def answer(self, request: Request) -> Answer:
        refusal = self.screen(request)
        if refusal is not None:
            return refusal
        if request.path == "/":
            return Answer(200, PAGE, "text/html; charset=utf-8", headers=_PAGE_HEADERS)
        if request.path == "/api/status":
            self.observe()
            return json_answer(200, snapshot(self.book, trio.current_time(), time.time()))
        if request.path == "/metrics":
            self.observe()
            text = metrics.render(self.book.rows(trio.current_time()))
            return Answer(200, text.encode("utf-8"), metrics.CONTENT_TYPE)
        if request.path == "/api/seed":
            return await self._seed(request)
        self.backend.stop_cluster()
        return json_answer(202, {"stopping": True})

    def _refuse_unless_authorised(self, request: Request) -> Answer | None:
        now, source = trio.current_time(), _guesser(request.source)
        if self._strikes.barred(source, now):
            # Not even looked at: a guess answered 401 or 202 would still be a guess.
            self._log_auth(source, "refused while barred", "", now)
            return error(
                429,
                "too many wrong secrets from this address: try again later",
                headers=(("Retry-After", f"{AUTH_PENALTY:.0f}"),),
            )
        scheme, _, token = request.headers.get("authorization", "").partition(" ")
        token = token.strip()
        # Header values come as Latin-1; clients send a secret in UTF-8, as `ubipy
        # seed` derives it (one outside Latin-1 could never authenticate).
        with contextlib.suppress(UnicodeError):
            token = token.encode("latin-1").decode("utf-8")
        if scheme.lower() == "bearer" and token:
            # Compared as derived keys: equal length, constant time, and the same
            # derivation the wire uses, so the token is simply the cluster secret.
            if hmac.compare_digest(secret_from(token), self.backend.secret):
                # Its earlier mistakes forgiven, as on the peer port (and trusted no
                # longer than this request: the trust is 0).
                self._strikes.authenticated(source)
                self._strikes.closed(source, now)
                return None
            challenge = 'Bearer realm="ubipy", error="invalid_token"'
            if self._strikes.failed(source, now):
                detail = f"{AUTH_STRIKES} within {AUTH_WINDOW:.0f} s: barred {AUTH_PENALTY:.0f} s"
                self._log_auth(source, "wrong secrets", detail, now, always=True)
            else:
                self._log_auth(source, "wrong secret", f"{request.method} {request.path}", now)
        else:
            # No token is no guess: a client that did not know one was needed.
            challenge = 'Bearer realm="ubipy"'
        needed = "the cluster secret is needed as a bearer token"
        if is_default_secret(self.backend.secret):
            # A peer without a secret (loopback only) takes the public one: said, as
            # it was nowhere but in docs/protocol.md (QA).
            needed += f" (this cluster has none: {LOOPBACK_SECRET})"
        return error(401, needed, headers=(("WWW-Authenticate", challenge),))

    def _log_auth(
        self, source: str, reason: str, detail: str, now: float, *, always: bool = False
    ) -> None:
        line = self._auth_log.line(source or "unknown", reason, detail, now, always=always)
        if line is not None:
            log.warning("control: %s", line)

    async def _seed(self, request: Request) -> Answer:
        media = request.headers.get("content-type", "text/plain").partition(";")[0]
        media = media.strip().lower()
        problems: list[str] = []
        if media == JSON_TYPE or media.endswith("+json"):
            try:
                value = json.loads(request.body, object_pairs_hook=_no_twice)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                return error(400, f"the body is not JSON: {exc}")
            except RecursionError:  # [[[[... a megabyte deep: logged as a crash before
                return error(400, "the body is not JSON this server reads: nested too deep")
            except ValueError as exc:  # a number of thousands of digits: Python's limit
                return error(400, f"the body is not JSON this server reads: {exc}")
            urls = value.get("urls") if isinstance(value, dict) else None
            if not isinstance(urls, list) or not all(isinstance(u, str) for u in urls):
                return error(400, 'expected {"urls": ["http://...", ...]}')
        elif media == "text/plain":
            seeds = parse_seeds(request.body)
            urls = list(seeds.urls)
            problems = [str(p) for p in seeds.problems]
            if seeds.unlisted:
                problems.append(f"and {seeds.unlisted} more lines skipped")
        else:
            return error(415, "send application/json or text/plain (one URL a line)")
        if not urls:
            return json_answer(400, {"error": "no URLs to seed", "problems": problems})
        try:
            result = dict(await self.backend.seed(urls))
        except ValueError as exc:
            return error(400, str(exc))
        if problems:
            result["problems"] = problems
        return json_answer(503 if "error" in result else 200, result)


def _announces_body(headers: Mapping[str, str]) -> bool:
    """Whether a request's head says a body follows (h11 has checked the length is a
    number; repeated lengths it lets through are equal)."""
    if "transfer-encoding" in headers:
        return True
    length = headers.get("content-length", "0").partition(",")[0].strip()
    return not length.isdigit() or int(length) > 0


def _host_allowed(host: str | None) -> bool:
    # HTTP/1.0 may omit Host; browsers, the attack this guards against, never do.
    return host is None or is_loopback(_host_of(host.strip().lower()))


def control_bind(address: str, public: bool, secret: bytes) -> tuple[str, int]:
    """Where to listen; ValueError for an address the control centre must not bind."""
    host, port = split_address(address)
    # "localhost" may resolve to two addresses, and with port 0 each would get its own port.
    host = "127.0.0.1" if host == "localhost" else host
    if not is_loopback(host):
        if not public:
            raise ValueError(
                f"the control endpoint binds loopback only, not {host}, unless asked to be "
                "public (ubipy peer --control-public, or public = true in [control])"
            )
        if is_default_secret(secret):
            raise ValueError(
                "refusing a public control endpoint without a cluster secret: anyone "
                "could stop the cluster"
            )
    return host, port


async def serve_control(
    backend: ControlBackend,
    address: str,
    *,
    public: bool = False,
    limits: ControlLimits | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve the control endpoints on ``address`` (HOST:PORT, port 0 for any) until
    cancelled; ``await nursery.start(serve_control, ...)`` gives the bound HOST:PORT."""
    limits = limits or ControlLimits()
    host, port = control_bind(address, public, backend.secret)
    control = ControlServer(backend, public=public, limits=limits)
    http = HttpServer(control.answer, limits.http, screen=control.screen)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(control.sample_forever)
        # The peer port's accept loop: out of descriptors, one line a minute, where
        # trio's listeners logged a traceback every 0.1 s (QA).
        bound = await nursery.start(TcpNetwork().serve, join_address(host, port), http.handle)
        log.info("control centre on http://%s/", bound)
        task_status.started(bound)


def _no_twice(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object, refused if it names a key twice: {"urls": [...], "urls": []} took the
    last one without a word (QA), where the wire's decoder refuses duplicate keys."""
    value = dict(pairs)
    if len(value) < len(pairs):
        raise ValueError("a key is given twice")
    return value


def _guesser(source: str) -> str:
    """Whose wrong secrets count together: every loopback address is one source (a
    client on this machine may send from any of 127.0.0.0/8: 40 guesses from 40 of
    them went unbarred, a review); others as the peer port counts them (Strikes)."""
    return "loopback" if is_loopback(source.removeprefix("::ffff:")) else source
