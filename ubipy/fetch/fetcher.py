"""One GET with a size cap, turned into a plain result record.

Network failures do not raise: they come back as a result with ``error`` set,
so the caller records and counts them like any other outcome.
"""

from __future__ import annotations

import logging
from contextlib import aclosing
from dataclasses import dataclass

import httpx2

log = logging.getLogger(__name__)

HTML_TYPES = frozenset({"text/html", "application/xhtml+xml"})


@dataclass(frozen=True, slots=True)
class FetchResult:
    url: str
    status: int | None
    content_type: str | None
    charset: str | None
    location: str | None
    last_modified: str | None
    etag: str | None
    retry_after: str | None
    body: bytes
    truncated: bool
    error: str | None

    @property
    def is_html(self) -> bool:
        return (
            self.status is not None
            and 200 <= self.status < 300
            and (self.content_type in HTML_TYPES)
        )

    @property
    def is_redirect(self) -> bool:
        return self.status is not None and 300 <= self.status < 400 and bool(self.location)


def _split_content_type(value: str | None) -> tuple[str | None, str | None]:
    if not value:
        return None, None
    mime, _, params = value.partition(";")
    charset = None
    for param in params.split(";"):
        key, _, val = param.strip().partition("=")
        if key.lower() == "charset" and val:
            charset = val.strip().strip("\"'") or None
    return mime.strip().lower() or None, charset


async def fetch(client: httpx2.AsyncClient, url: str, *, max_bytes: int) -> FetchResult:
    """GET ``url``; keep at most ``max_bytes`` of the (decoded) body."""
    try:
        async with client.stream("GET", url) as response:
            ctype, charset = _split_content_type(response.headers.get("content-type"))
            chunks: list[bytes] = []
            size = 0
            truncated = False
            # Decoded bytes are what is capped, so a compression bomb stops at the cap.
            # Closed explicitly: leaving the loop early must not strand the generator.
            async with aclosing(response.aiter_bytes()) as body:
                async for chunk in body:
                    if size + len(chunk) > max_bytes:
                        chunks.append(chunk[: max_bytes - size])
                        truncated = True
                        break
                    chunks.append(chunk)
                    size += len(chunk)
            h = response.headers
            return FetchResult(
                url=url,
                status=response.status_code,
                content_type=ctype,
                charset=charset,
                location=h.get("location"),
                last_modified=h.get("last-modified"),
                etag=h.get("etag"),
                retry_after=h.get("retry-after"),
                body=b"".join(chunks),
                truncated=truncated,
                error=None,
            )
    except httpx2.TimeoutException as exc:
        return failed(url, f"timeout: {type(exc).__name__}")
    except httpx2.HTTPError as exc:
        return failed(url, f"{type(exc).__name__}: {exc}"[:300])
    except (OSError, ValueError) as exc:
        # Malformed responses and odd sockets surface as these below httpx.
        return failed(url, f"{type(exc).__name__}: {exc}"[:300])


def failed(url: str, error: str) -> FetchResult:
    """The result of a request that got no usable response."""
    return FetchResult(
        url=url,
        status=None,
        content_type=None,
        charset=None,
        location=None,
        last_modified=None,
        etag=None,
        retry_after=None,
        body=b"",
        truncated=False,
        error=error,
    )
