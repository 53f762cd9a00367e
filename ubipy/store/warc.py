"""Pages as WARC 1.1 records (written with warcio), a continuous crawl's history as
Heritrix writes it, so that an archive holds each version of a page once.

For each page, in time order: its first fetch as a ``request``, a ``response`` and a
``metadata`` record; then each later visit as a ``request``, and a ``response`` when
the page had changed (the new version's body) or a ``revisit`` when it had not, with
a ``metadata`` record; a visit answered with something else than the page (a 404, a
410, a 503, a redirect) gets a ``response`` of its own when its body was kept, so that
a replay shows the page gone or moved from then on (a redirect's only from a shard of
version 18 on, which keeps its ``Location``). A revisit's profile is
``server-not-modified`` for a 304 and ``identical-payload-digest`` for a 200 of the
same digest; it refers (``WARC-Refers-To``,
``-Target-URI``, ``-Date``) to the response record that holds the version it saw: the
latest changed version before it, or the first fetch.

What a WARC holds, and what it cannot
-------------------------------------
A shard keeps a page's status, bare media type, ``Last-Modified``, ``ETag`` and its
body, decoded (no ``Content-Encoding``, no chunking): it does not keep the request
or the response headers. So the HTTP parts of the WARC records are *reconstructed*:

* the response record's block is ``HTTP/1.1 <status> <reason>`` and a minimal header
  block built from what is stored (``Content-Type``, ``Content-Length`` of the stored
  body, ``Last-Modified``, ``ETag``, a redirect's ``Location``), followed by the
  stored body. The charset the server declared is there when it decided the page's
  encoding (a replay read a GBK page whose ``<meta>`` says UTF-8 as UTF-8, QA); every
  other header is not (``Location`` is the target the crawler followed: absolute,
  normalised as a link is);
  a revisit's block is the same header block without a body, from the version it
  refers to (a 304's: ``ETag`` and ``Last-Modified`` only);
* the request record is ``GET <path> HTTP/1.1`` with a ``Host`` header, and for a
  later visit the validators it was asked with (``If-None-Match``,
  ``If-Modified-Since``: those of the version held then).

The warcinfo record says so. A truncated body (cut at ``--max-body``) gets
``WARC-Truncated: length``. Only real HTTP responses go into a WARC: a page with no
status (the request failed), one whose processing failed, or one whose body was not
kept (``--no-bodies``) is left out and counted; so is a visit that failed (no
answer) or whose body was not kept, and a revisit whose version is not in the WARC
(nothing there to refer to). JSON Lines has every page and visit.
"""

from __future__ import annotations

import http
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import IO, Any
from urllib.parse import urlsplit

from warcio.statusandheaders import StatusAndHeaders, StatusAndHeadersParser
from warcio.warcwriter import WARCWriter

from ubipy import PROJECT_URL, __version__
from ubipy.store.idn import unicode_url
from ubipy.store.snapshot import (
    ExportSummary,
    InWarc,
    PageHistory,
    StoredPage,
    StoredVisit,
    iso_utc,
)
from ubipy.store.warcrecords import CONFORMS_TO as _CONFORMS_TO
from ubipy.store.warcrecords import NOT_MODIFIED as NOT_MODIFIED
from ubipy.store.warcrecords import SAME_PAYLOAD as SAME_PAYLOAD
from ubipy.store.warcrecords import WARC_VERSION as WARC_VERSION
from ubipy.store.warcrecords import field_value as _field
from ubipy.store.warcrecords import metadata_block

__all__ = ["NOT_MODIFIED", "SAME_PAYLOAD", "WARC_VERSION", "write_warc"]


@dataclass(frozen=True, slots=True)
class _Version:
    """A version of a page, as its response record's HTTP headers say it."""

    status: int
    content_type: str | None
    length: int
    etag: str | None
    last_modified: str | None
    # The charset of the Content-Type, where the server's header gave the encoding.
    charset: str | None = None
    location: str | None = None  # a redirect's target


@dataclass(frozen=True, slots=True)
class _Held:
    """The response record of the version a page has now: what a revisit refers to."""

    record_id: str
    date: str
    payload_digest: str
    version: _Version


def _there(capture: InWarc, at: float, version: _Version | None) -> _Held | None:
    """The response in the peer's WARC files that holds ``version``, for a revisit
    written beside them to refer to; None when it holds no answer to refer to."""
    if capture.payload_digest is None or version is None:
        return None
    return _Held(capture.record_id, iso_utc(at), capture.payload_digest, version)


def _version_of(visit: StoredVisit) -> _Version:
    return _Version(
        visit.status or 0,
        visit.content_type,
        visit.length,
        visit.etag,
        visit.last_modified,
        location=visit.location,
    )


def _http_headers(version: _Version, *, status: int | None = None) -> StatusAndHeaders:
    """A response's status line and headers, reconstructed; with ``status`` 304, those
    of a Not Modified answer about ``version`` (its validators only)."""
    code = version.status if status is None else status
    try:
        reason = http.HTTPStatus(code).phrase
    except ValueError:
        reason = ""
    headers: list[tuple[str, str]] = []
    if code != 304:
        if version.content_type:
            charset = f"; charset={version.charset}" if version.charset else ""
            headers.append(("Content-Type", _field(version.content_type + charset)))
        headers.append(("Content-Length", str(version.length)))
    if version.last_modified:
        headers.append(("Last-Modified", _field(version.last_modified)))
    if version.etag:
        headers.append(("ETag", _field(version.etag)))
    if version.location and 300 <= code < 400:
        headers.append(("Location", _field(version.location)))
    # The space after the code stays when there is no reason phrase (RFC 9112, 4).
    return StatusAndHeaders(f"{code} {reason}", headers, protocol="HTTP/1.1")


def _request_headers(url: str, held: _Version | None = None) -> StatusAndHeaders:
    """``GET`` with ``Host``; for a later visit, conditional on the version ``held``."""
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = [("Host", parts.netloc.rpartition("@")[2])]
    if held is not None and held.etag:
        headers.append(("If-None-Match", _field(held.etag)))
    if held is not None and held.last_modified:
        headers.append(("If-Modified-Since", _field(held.last_modified)))
    return StatusAndHeaders(f"GET {target} HTTP/1.1", headers, protocol="", is_http_request=True)


def _metadata(page: StoredPage, visit: StoredVisit | None) -> bytes:
    at = page.fetched_at if visit is None else visit.at
    return metadata_block(
        page.peer,
        page.url,
        unicode_url(page.url),
        at,
        page.depth,
        changed=None if visit is None else visit.changed,
        truncated=page.truncated if visit is None else visit.truncated,
        title=page.title,
        encoding=page.encoding,
        encoding_source=page.encoding_source,
    )


class _Writer:
    """Writes each page's history and counts what it wrote and left out."""

    def __init__(self, out: IO[bytes], filename: str, peers: list[str], gzipped: bool) -> None:
        self._w = WARCWriter(out, gzip=gzipped, warc_version=WARC_VERSION)
        info = self._w.create_warcinfo_record(
            # A name that is not UTF-8 (its bytes as surrogates) could not be written.
            os.fsencode(filename).decode("utf-8", "replace"),
            {
                "software": f"ubipy/{__version__} (+{PROJECT_URL})",
                "format": "WARC File Format 1.1",
                "conformsTo": _CONFORMS_TO,
                "ubipy-peers": " ".join(peers),
                "description": "Pages exported from ubipy shards. The shard keeps a page's "
                "status, media type, Last-Modified, ETag, redirect target and decoded body, "
                "not its headers: "
                "the HTTP status lines and headers here are reconstructed from those fields, "
                "and each request record holds only the method, target, Host and the "
                "validators a later visit was asked with.",
            },
        )
        self._info_id = info.rec_headers.get_header("WARC-Record-ID")
        self._w.write_record(info)
        self.records = 1
        self.pages = self.left_out = self.visits = self.visits_left_out = self.sitemaps = 0
        self.sitemaps_left_out = 0

    def history(self, history: PageHistory) -> None:
        page = history.page
        # The version held: a refresh asks with its validators.
        held: _Version | None = None
        if page.status is not None:
            charset = page.encoding if page.encoding_source == "header" else None
            held = _Version(page.status, page.content_type, page.length, page.etag,
                            page.last_modified, charset, page.location)  # fmt: skip
        # Its response in this WARC: what a revisit refers to.
        here: _Held | None = None
        if page.in_warc is not None:
            # Its records are in the peer's WARC files (and counted there).
            here = _there(page.in_warc, page.fetched_at, held)
        else:
            self.pages += 1
            body = page.body if page.body is not None or page.length else b""
            if page.is_response and body is not None and held is not None:
                held = replace(held, length=len(body))
                here = self._capture(page, None, held, body, page.truncated, None)
                self.sitemaps += page.is_sitemap
            else:
                self.left_out += 1
                self.sitemaps_left_out += page.is_sitemap
        for visit in history.visits:
            if visit.in_warc is not None:
                if visit.changed:
                    held = _version_of(visit)
                    here = _there(visit.in_warc, visit.at, held)
                continue
            self.visits += 1
            if visit.changed:
                asked, held = held, _version_of(visit)
                here = self._changed(page, visit, held, asked)
                written = here is not None
            elif visit.is_unchanged_answer:
                written = here is not None
                if here is not None:
                    self._revisit(page, visit, here, held)
            elif visit.location is not None or (
                visit.body is not None and not 300 <= (visit.status or 0) < 400
            ):
                # Not the page (a 404, a 503, a redirect): its own response, no version
                # of it. Only with its body kept (a shard before such visits kept theirs
                # has none: a response would be made up), and a redirect only with its
                # Location (a shard before version 18 kept none; its empty body is one).
                written = self._changed(page, visit, _version_of(visit), held) is not None
            else:
                written = False
            self.visits_left_out += not written

    def _changed(
        self, page: StoredPage, visit: StoredVisit, version: _Version, asked: _Version | None
    ) -> _Held | None:
        """A changed visit's response, or None when it cannot be one (then the revisits
        after it have nothing here to refer to)."""
        body = visit.body if visit.body is not None or visit.length else b""
        if visit.status is None or body is None:
            return None
        return self._capture(
            page, visit, replace(version, length=len(body)), body, visit.truncated, asked
        )

    def _capture(
        self,
        page: StoredPage,
        visit: StoredVisit | None,
        version: _Version,
        body: bytes,
        truncated: bool,
        asked: _Version | None,
    ) -> _Held:
        """A response with its request and metadata, written; what it holds, for revisits."""
        response_id = StatusAndHeadersParser.make_warc_id()
        date = iso_utc(page.fetched_at if visit is None else visit.at)
        common = {"WARC-Date": date, "WARC-Warcinfo-ID": self._info_id}
        response_warc: dict[str, str] = {**common, "WARC-Record-ID": response_id}
        if truncated:
            response_warc["WARC-Truncated"] = "length"
        response = self._w.create_warc_record(
            page.url,
            "response",
            payload=io.BytesIO(body),
            length=len(body),
            http_headers=_http_headers(version),
            warc_headers_dict=response_warc,
        )
        digest = response.rec_headers.get_header("WARC-Payload-Digest")
        self._linked(page, visit, response, response_id, common, asked)
        return _Held(response_id, date, digest, version)

    def _revisit(
        self, page: StoredPage, visit: StoredVisit, held: _Held, asked: _Version | None
    ) -> None:
        """A revisit (headers, no payload) that refers to the response of ``held``."""
        record_id = StatusAndHeadersParser.make_warc_id()
        common = {"WARC-Date": iso_utc(visit.at), "WARC-Warcinfo-ID": self._info_id}
        refers = {
            **common,
            "WARC-Record-ID": record_id,
            "WARC-Refers-To": held.record_id,
        }
        record: Any
        if visit.status == 304:
            # No payload digest: the spec advises against it for this profile (there is
            # no payload to digest), as Heritrix does; the referred record has it.
            record = self._w.create_warc_record(
                page.url,
                "revisit",
                http_headers=_http_headers(held.version, status=304),
                warc_headers_dict={
                    **refers,
                    "WARC-Profile": NOT_MODIFIED,
                    "WARC-Refers-To-Target-URI": page.url,
                    "WARC-Refers-To-Date": held.date,
                },
            )
        else:
            record = self._w.create_revisit_record(
                page.url,
                held.payload_digest,
                page.url,
                held.date,
                http_headers=_http_headers(held.version),
                warc_headers_dict=refers,
            )
            record.rec_headers.replace_header("WARC-Profile", SAME_PAYLOAD)
        self._linked(page, visit, record, record_id, common, asked)

    def _linked(
        self,
        page: StoredPage,
        visit: StoredVisit | None,
        capture: Any,
        capture_id: str,
        common: dict[str, str],
        asked: _Version | None,
    ) -> None:
        """Writes ``capture`` between its request and its metadata record."""
        request = self._w.create_warc_record(
            page.url,
            "request",
            http_headers=_request_headers(page.url, asked),
            warc_headers_dict={**common, "WARC-Concurrent-To": capture_id},
        )
        meta = _metadata(page, visit)
        metadata = self._w.create_warc_record(
            page.url,
            "metadata",
            payload=io.BytesIO(meta),
            length=len(meta),
            warc_content_type="application/warc-fields",
            warc_headers_dict={**common, "WARC-Refers-To": capture_id},
        )
        for record in (request, capture, metadata):
            self._w.write_record(record)
        self.records += 3


def write_warc(
    histories: Iterator[PageHistory],
    out: IO[bytes],
    filename: str,
    peers: list[str],
    shards: int,
    gzipped: bool,
) -> ExportSummary:
    """A warcinfo record, then every page's history (see the module's docstring)."""
    writer = _Writer(out, filename, peers, gzipped)
    for history in histories:
        writer.history(history)
    return ExportSummary(
        shards=shards,
        pages=writer.pages,
        records=writer.records,
        left_out=writer.left_out,
        visits=writer.visits,
        visits_left_out=writer.visits_left_out,
        sitemaps=writer.sitemaps,
        sitemaps_left_out=writer.sitemaps_left_out,
    )
