"""The options of issue #16's filters and TLS: --include, --exclude, --accept and
--ca-bundle, from flags and files, and a bad one ending the command at start with
one clear line and status 2."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trustme

from ubipy.cli import main
from ubipy.config import BoundsConfig, CrawlConfig, FetchConfig
from ubipy.errors import ConfigError
from ubipy.seedfiles import refusals
from ubipy.statustable import format_cluster


def test_the_filters_are_repeatable_flags(peer_config: Any, tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    trustme.CA().cert_pem.write_to_path(str(bundle))
    config = peer_config(
        "--data", str(tmp_path), "--include", r"\.example/", "--include", "/docs/",
        "--exclude", r"\?print=", "--accept", "application/pdf", "--accept", "image/*",
        "--ca-bundle", str(bundle),
    )  # fmt: skip
    assert config.bounds.include == (r"\.example/", "/docs/")
    assert config.bounds.exclude == (r"\?print=",)
    assert config.fetch.accept == ("application/pdf", "image/*")
    assert config.fetch.ca_bundle == bundle


def test_the_filters_come_from_a_file(peer_config: Any, tmp_path: Path) -> None:
    path = tmp_path / "crawl.toml"
    path.write_text(
        '[bounds]\ninclude = ["/a/"]\nexclude = ["/a/b/"]\n[fetch]\naccept = ["text/plain"]\n'
    )
    config = peer_config("--data", str(tmp_path), "--config", str(path))
    assert (config.bounds.include, config.bounds.exclude) == (("/a/",), ("/a/b/",))
    assert config.fetch.accept == ("text/plain",)


def test_the_defaults_filter_nothing_and_keep_html_only() -> None:
    config = CrawlConfig()
    assert (config.bounds.include, config.bounds.exclude, config.fetch.accept) == ((), (), ())
    assert config.fetch.ca_bundle is None


@pytest.mark.parametrize("pattern", ["a{4294967296}", "(?:" * 5000 + "a" + ")" * 5000])
def test_a_pattern_too_deep_or_too_large_ends_the_peer_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], pattern: str
) -> None:
    """Parentheses nested thousands deep ended in a traceback (RecursionError)."""
    with pytest.raises(SystemExit) as ended:
        main(["peer", "--data", str(tmp_path), "--include", pattern])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("ubipy peer: error: --include is not a regular expression: ")
    assert err.count("\n") == 1


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--include", "a(b"),
            "--include is not a regular expression: 'a(b' (missing ), unterminated subpattern "
            "at position 1)",
        ),
        (
            ("--exclude", "[x"),
            "--exclude is not a regular expression: '[x' (unterminated character set at "
            "position 0)",
        ),
        (
            ("--include", "^https://bücher\\.example/"),
            "--include '^https://bücher\\\\.example/' holds what no URL does: URLs are "
            "matched as requested, hosts in punycode (xn--...) and paths percent-encoded "
            "(%C3%A9)",
        ),
        (
            ("--accept", "pdf"),
            "--accept is not a media type (type/subtype, type/* or */*): 'pdf'",
        ),
        (
            ("--accept", "*/html"),
            "--accept is not a media type (type/subtype, type/* or */*): '*/html'",
        ),
    ],
)
def test_a_bad_filter_ends_the_peer_at_start(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    message: str,
) -> None:
    with pytest.raises(SystemExit) as ended:
        main(["peer", "--data", str(tmp_path), *flags])
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"ubipy peer: error: {message}\n"


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (
            ("--user-agent", "crawler-\u00e9"),
            "--user-agent must be printable ASCII (letters, digits, punctuation, spaces): "
            "'crawler-\u00e9'",
        ),
        (
            ("--user-agent", "bot\r\nX-Injected: 1"),
            "--user-agent must be printable ASCII (letters, digits, punctuation, spaces): "
            "'bot\\r\\nX-Injected: 1'",
        ),
        (("--proxy", "not a url"), "--proxy must be an http://HOST[:PORT] URL, not 'not a url'"),
        (
            ("--proxy", "ftp://proxy.test:21"),
            "--proxy must be an http://HOST[:PORT] URL, not 'ftp://proxy.test:21'",
        ),
        (
            ("--proxy", "http://proxy.test:99999"),
            "--proxy is not a URL: 'http://proxy.test:99999' (Port out of range 0-65535)",
        ),
        (
            ("--proxy", "http://u:p@proxy.test:3128"),
            "--proxy must not carry credentials (not supported)",
        ),
        (
            ("--proxy", " http://127.0.0.1:3128"),  # urlsplit strips the space; httpx2 not
            "--proxy must be an http://HOST[:PORT] URL, not ' http://127.0.0.1:3128'",
        ),
        (
            ("--proxy", "http://[v1.fe]:80"),  # urlsplit takes it; the transport did not
            "--proxy is not a URL: 'http://[v1.fe]:80' (Invalid IPv6 address: '[v1.fe]')",
        ),
    ],
)
def test_a_user_agent_or_proxy_that_cannot_be_used_ends_the_peer_at_start(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    flags: tuple[str, ...],
    message: str,
) -> None:
    """A non-ASCII user agent stopped the peer with a traceback at its first request;
    one with a line break, or a proxy that is not an http:// URL, had every host
    given up as "robots.txt unreachable" (found by a review)."""
    with pytest.raises(SystemExit) as ended:
        main(["peer", "--data", str(tmp_path), *flags])
    assert ended.value.code == 2
    assert capsys.readouterr().err == f"ubipy peer: error: {message}\n"


def test_a_missing_or_bad_ca_bundle_ends_the_peer_at_start(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nowhere.pem"
    with pytest.raises(SystemExit) as ended:
        main(["peer", "--data", str(tmp_path), "--ca-bundle", str(missing)])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err == (
        f"ubipy peer: error: --ca-bundle cannot be read: {missing}: No such file or directory\n"
    )
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a certificate\n")
    with pytest.raises(SystemExit) as ended:
        main(["peer", "--data", str(tmp_path), "--ca-bundle", str(garbage)])
    assert ended.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(
        f"ubipy peer: error: --ca-bundle is not a PEM file of CA certificates: {garbage}"
    )


def test_the_sections_check_their_filters() -> None:
    with pytest.raises(ConfigError, match="include"):
        BoundsConfig(include=("(",))
    with pytest.raises(ConfigError, match="accept"):
        FetchConfig(accept=("text",))
    assert FetchConfig(accept=("*/*", "Image/*", "application/vnd.ms-excel")).accept


def test_the_status_table_ends_with_what_each_peers_filters_left_out() -> None:
    def figures(peer_id: str, **more: Any) -> dict[str, Any]:
        return {
            "peer_id": peer_id, "address": "x", "version": "0.1.0", "started_at": 0.0,
            "uptime": 10.0, "pages": 5, "pages_per_second": 0.5, "errors": 0, "timeouts": 0,
            "pending": 0, "hosts": 1, "in_flight": 0, "bytes_in": 0, "bytes_out_wire": 0,
            "storage_error": None, **more,
        }  # fmt: skip

    report = {
        "members": [
            {"id": "aaaa", "address": "127.0.0.1:7001", "state": "alive"},
            {"id": "bbbb", "address": "127.0.0.1:7002", "state": "alive"},
        ],
        "peers": [
            figures(
                "aaaa",
                excluded=3,
                not_included=0,
                skipped_by_type=0,
                skipped_types="",
                # Under --recrawl: its pages counted these visits, and nothing said so (QA).
                refreshes=40,
                refreshes_unchanged=36,
                refreshes_not_modified=30,
                pages_retired=2,
                # Not closed: put off till robots.txt is read again (QA: read as closed).
                refreshes_barred=4,
            ),
            figures(
                "bbbb",
                excluded=1,
                not_included=2,
                too_deep=5,
                skipped_by_type=4,
                skipped_types="image 3, application 1",
                certificate_errors=1,
                skipped=3,
                skipped_why="robots.txt unreachable: 2; host page budget: 1",
                out_of_scope=7,
                sitemap_skipped=1,
                sitemaps_cut=2,
            ),
        ],
    }
    table = format_cluster(report, now=100.0).splitlines()
    assert table[3].startswith("total (2)")
    # What the figures count (QA: 18 pages read as the crawl's, the shards holding 3,642).
    assert (
        table[4]
        == "(pages, errors, time-outs, bytes: since each peer started; hosts: those it schedules)"
    )
    assert table[5:] == [
        "aaaa: 3 excluded by --exclude; 40 refreshes of pages fetched before (36 unchanged, "
        "30 of them 304s; 2 pages retired; 4 put off, robots.txt forbidding or not to be had)",
        "bbbb: 1 excluded by --exclude; 2 matching no --include; 5 deeper than --max-depth; "
        "4 answers of types not "
        "accepted (image 3, application 1); 3 URLs closed unasked (robots.txt unreachable: 2; "
        "host page budget: 1); 7 links outside --scope (each time seen); 1 sitemap entry past the "
        "protocol's limits; 2 sitemaps read in part (past 50 MB or the body cap); 1 certificate "
        "error",
    ]


def test_refused_seeds_are_summed_up_by_reason() -> None:
    refused = [("a", "excluded by --exclude"), ("b", "excluded by --exclude"), ("c", "not http")]
    assert refusals(refused) == "3 refused (2 excluded by --exclude, 1 not http)"
