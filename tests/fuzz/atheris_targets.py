"""Coverage-guided fuzzing of the same targets with atheris (libFuzzer), for a long
run outside the test suite: ``make fuzz-atheris`` (FUZZ_SECONDS per target), or one
target by hand::

    pip install atheris
    python -m tests.fuzz.atheris_targets html -max_total_time=300 [corpus_dir]

Each target holds the same rules as its hypothesis test: only the module's own
error, and sane results (the checks are the tests' own). A crash is written by
libFuzzer as ``crash-<sha1>``; its bytes make a hypothesis ``@example``.
Not collected by pytest (no ``test_`` prefix); atheris is not a test dependency.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable

import atheris  # type: ignore[import-untyped, import-not-found, unused-ignore]

with atheris.instrument_imports(include=["ubipy", "protego"]):
    import cbor2

    from tests.fuzz.common import (
        KEY,
        NOW,
        RECEIVER,
        body_with_raw_payload,
        check_typed,
        is_event,
        signed,
    )
    from tests.fuzz.test_html import check as check_page
    from tests.fuzz.test_seed_files import check as check_seeds
    from tests.fuzz.test_url_normalisation import normalises_or_refuses
    from ubipy.errors import WireError
    from ubipy.fetch.parse import parse_html
    from ubipy.fetch.robots import RobotsRules
    from ubipy.fetch.urls import BadURL, normalize, path_and_query
    from ubipy.membership import message_from_wire
    from ubipy.wire import CLOSED, NEED_DATA, Frame, FrameType, ReplayGuard, decode
    from ubipy.wire.reader import FrameReader

_KINDS = sorted(FrameType)


def reader(data: bytes) -> None:
    """A raw stream, a body under a good tag, or a payload under a good tag, fed
    in pieces of a size the input picks."""
    fdp = atheris.FuzzedDataProvider(data)
    mode = fdp.ConsumeIntInRange(0, 2)
    piece = fdp.ConsumeIntInRange(1, 64)
    kind = int(_KINDS[fdp.ConsumeIntInRange(0, len(_KINDS) - 1)])
    rest = fdp.ConsumeBytes(fdp.remaining_bytes())
    if mode == 1:
        rest = signed(rest)
    elif mode == 2:
        rest = signed(body_with_raw_payload(kind, rest))
    r = FrameReader(KEY, ReplayGuard(local_id=RECEIVER), max_frame=4096, first_max_frame=1024)
    for at in [*range(0, len(rest), piece), -1]:
        r.receive_data(rest[at : at + piece] if at >= 0 else b"")
        for _ in range(r.buffered + 2):
            event = r.next_event(NOW)
            assert is_event(event)
            if isinstance(event, Frame):
                check_typed(event)
            if event is NEED_DATA or event is CLOSED:
                break
        assert r.buffered < 4 + (4096 if r.frames else 1024)


def _loads(data: bytes) -> object:
    # cbor2 without ubipy's restrictions: every type it can make reaches the decoders.
    try:
        return cbor2.loads(data)
    except Exception:  # cbor2's own refusal of these bytes; not what is fuzzed here
        return None


def payloads(data: bytes) -> None:
    if not data:
        return
    kind = _KINDS[data[0] % len(_KINDS)]
    value = _loads(data[1:])
    with contextlib.suppress(WireError):
        decode(kind, value)


def membership(data: bytes) -> None:
    with contextlib.suppress(WireError):
        message_from_wire(_loads(data))


def seeds(data: bytes) -> None:
    check_seeds(data)


def robots(data: bytes) -> None:
    rules = RobotsRules.parse(data)
    for url in ("http://h.test/", "http://h.test/private/a.php?q=1", "http://h.test//x"):
        assert rules.allowed(url) in (True, False)
        assert rules.allowed(path_and_query(url)) in (True, False)
    text = data[:200].decode("utf-8", "replace")
    try:
        url = normalize("/" + text, "http://h.test/")
    except BadURL:
        return
    assert rules.allowed(url) in (True, False)


_CHARSETS = [None, "utf-8", "utf-16", "latin-1", "shift_jis", "x-bogus", "\x00", "utf-7"]
# libxml2 is not instrumented, so coverage alone would seldom find a tag: the input
# picks these pieces, or raw bytes, to build the page from.
_PIECES = [b"<a href=", b"<area href=", b"<frame src=", b"<iframe src=", b"<base href=",
           b"<meta name=robots content=", b"<meta name=ubipy content=", b"<title>", b"</title>",
           b" rel=nofollow", b"nofollow", b"noindex", b"none", b'"', b"'", b">", b"</a>",
           b"<div>", b"<svg>", b"<template>", b"<!--", b"<script>", b"http://", b"//x.test/",
           b"/", b"..", b"?", b"#", b"%", b"javascript:", b"mailto:", b"&amp;", b"&#0;",
           b"\xff"]  # fmt: skip


def html(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    charset = _CHARSETS[fdp.ConsumeIntInRange(0, len(_CHARSETS) - 1)]
    body = bytearray()
    while fdp.remaining_bytes():
        pick = fdp.ConsumeIntInRange(0, len(_PIECES))
        if pick < len(_PIECES):
            body += _PIECES[pick]
        else:
            body += fdp.ConsumeBytes(fdp.ConsumeIntInRange(1, 16))
    check_page(parse_html(bytes(body), "http://page.test/dir/", encoding=charset), 10_000)


def urls(data: bytes) -> None:
    fdp = atheris.FuzzedDataProvider(data)
    with_base = fdp.ConsumeBool()
    base = fdp.ConsumeUnicode(40) if with_base else None
    href = fdp.ConsumeUnicode(fdp.remaining_bytes())
    normalises_or_refuses(href, base)
    normalises_or_refuses(href, "http://base.test/dir/page")


TARGETS: dict[str, Callable[[bytes], None]] = {
    f.__name__: f for f in (reader, payloads, membership, seeds, robots, html, urls)
}


def main() -> None:
    if len(sys.argv) < 2 or sys.argv[1] not in TARGETS:
        sys.exit(
            f"usage: python -m tests.fuzz.atheris_targets {{{','.join(TARGETS)}}} [libFuzzer flags]"
        )
    target = TARGETS[sys.argv[1]]
    atheris.Setup([sys.argv[0], *sys.argv[2:]], target)
    atheris.Fuzz()


if __name__ == "__main__":
    main()
