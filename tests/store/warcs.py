"""WARC files as a peer leaves them in DATA/warc, written with warcio's own writer (one
gzip member per record), for the index tests; and pywb's replay and indexer, run in a
child process (pywb's app monkey-patches the interpreter with gevent on import)."""

from __future__ import annotations

import base64
import io
import json
import subprocess
import sys
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from warcio.archiveiterator import ArchiveIterator
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

PEER = "0123456789abcdef"
T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
# A host name and a path that are not ASCII, as a server may send them in a link: the
# record keeps the IRI, the index its SURT key (IDNA host, percent-encoded path).
UNICODE_URL = "http://bücher.example/straße/ü?q=é"
UNICODE_ASKED = "http://xn--bcher-kva.example/stra%C3%9Fe/%C3%BC?q=%C3%A9"


@dataclass(frozen=True, slots=True)
class Page:
    """A response written: what replay and the indexes should give back."""

    url: str
    host: str
    status: int
    body: bytes
    at: datetime
    revisited: bool  # a later revisit record refers to it

    @property
    def timestamp(self) -> str:
        return self.at.strftime("%Y%m%d%H%M%S")


def iso(at: datetime) -> str:
    return at.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def warc_name(serial: int, peer: str = PEER) -> str:
    return f"ubipy-{peer}-20260102030405-{serial:05d}.warc.gz"


def write_warc(path: Path, pages: list[Page], peer: str = PEER) -> None:
    """A warcinfo, then per page a request, a response and a metadata record, and a
    revisit (304, server-not-modified) an hour later for those revisited."""
    with open(path, "wb") as f:
        w = WARCWriter(f, gzip=True, warc_version="1.1")
        w.write_record(w.create_warcinfo_record(path.name, {"ubipy-peer": peer}))
        for page in pages:
            common = {"WARC-Date": iso(page.at)}
            response = w.create_warc_record(
                page.url,
                "response",
                payload=io.BytesIO(page.body),
                length=len(page.body),
                http_headers=StatusAndHeaders(
                    f"{page.status} {'OK' if page.status == 200 else 'Not Found'}",
                    [
                        ("Content-Type", "text/html; charset=utf-8"),
                        ("Content-Length", str(len(page.body))),
                    ],
                    protocol="HTTP/1.1",
                ),
                warc_headers_dict=common,
            )
            response_id = response.rec_headers.get_header("WARC-Record-ID")
            request = w.create_warc_record(
                page.url,
                "request",
                http_headers=StatusAndHeaders(
                    "GET / HTTP/1.1", [("Host", page.host)], is_http_request=True
                ),
                warc_headers_dict={**common, "WARC-Concurrent-To": response_id},
            )
            fields = f"peer-id: {peer}\r\n".encode()
            metadata = w.create_warc_record(
                page.url,
                "metadata",
                payload=io.BytesIO(fields),
                length=len(fields),
                warc_content_type="application/warc-fields",
                warc_headers_dict={**common, "WARC-Refers-To": response_id},
            )
            for record in (request, response, metadata):
                w.write_record(record)
            if page.revisited:
                later = iso(page.at + timedelta(hours=1))
                revisit = w.create_warc_record(
                    page.url,
                    "revisit",
                    http_headers=StatusAndHeaders("304 Not Modified", [], protocol="HTTP/1.1"),
                    warc_headers_dict={
                        "WARC-Date": later,
                        "WARC-Profile": "http://netpreserve.org/warc/1.1/revisit/"
                        "server-not-modified",
                        "WARC-Refers-To": response_id,
                        "WARC-Refers-To-Target-URI": page.url,
                        "WARC-Refers-To-Date": iso(page.at),
                    },
                )
                w.write_record(revisit)


def crawl_pages(n: int, start: int = 0) -> list[Page]:
    """``n`` pages over four hosts (a fifth has the non-ASCII URL), one in three revisited,
    one in seven a 404, a second apart."""
    pages = []
    for i in range(start, start + n):
        url = UNICODE_URL if i == start else f"http://host{i % 4}.example/p/{i}?x={i % 3}"
        host = url.split("/")[2]
        body = f"<html><title>page {i}</title>{'words ' * (i % 50)}</html>".encode()
        at = T0 + timedelta(seconds=i)
        pages.append(Page(url, host, 404 if i % 7 == 3 else 200, body, at, i % 3 == 0))
    return pages


def records(path: Path) -> list[tuple[str, str, int, int]]:
    """(type, target URI, offset, length) of every record, as warcio reads them."""
    found = []
    with open(path, "rb") as f:
        it = ArchiveIterator(f)
        for record in it:
            it.read_to_end(record)
            offset, length = it.member_info
            uri = record.rec_headers.get_header("WARC-Target-URI") or ""
            found.append((record.rec_type, uri, offset, length))
    return found


def record_at(path: Path, offset: int) -> Any:
    """The record that starts at ``offset``, read by warcio alone, its payload read."""
    with open(path, "rb") as f:
        f.seek(offset)
        record = next(iter(ArchiveIterator(f)))
        record.payload = record.content_stream().read()
        return record


_REPLAY = """
import base64, json, sys
from pywb.apps.frontendapp import FrontEndApp
from werkzeug.test import Client

directory = sys.argv[1]
config = {"collections": {"coll": {"index_paths": directory, "archive_paths": directory}}}
client = Client(FrontEndApp(custom_config=config))
for path in sys.argv[2:]:
    answer = client.get(path)
    body = base64.b64encode(answer.get_data()).decode()
    print("ANSWER", json.dumps({"status": answer.status_code, "body": body}))
"""


def pywb_replay(directory: Path, paths: list[str], cwd: Path) -> list[tuple[int, bytes]]:
    """pywb's own app, a collection with ``directory`` as its index and archive
    directory, asked for each of ``paths`` (WSGI calls in a child process: its warcserver
    listens on loopback while it lives)."""
    done = subprocess.run(
        [sys.executable, "-c", _REPLAY, f"{directory}/", *paths],
        capture_output=True,
        cwd=cwd,  # pywb reads ./config.yaml
        timeout=120,
        check=True,
    )
    # pywb prints too (a config.yaml not found, the directories it loads).
    lines = done.stdout.decode().splitlines()
    answers = [json.loads(line[7:]) for line in lines if line.startswith("ANSWER ")]
    return [(a["status"], base64.b64decode(a["body"])) for a in answers]


def pywb_cdxj(path: Path, cwd: Path) -> bytes:
    """The sorted CDXJ pywb's own indexer (``cdx-indexer --cdxj --sort``) makes."""
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from pywb.indexer.cdxindexer import main; main(sys.argv[1:])",
            "--cdxj",
            "--sort",
            str(path),
        ],
        capture_output=True,
        cwd=cwd,
        timeout=120,
        check=True,
    )
    return done.stdout
