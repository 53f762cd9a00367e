"""The scaling harness's summaries on made-up runs: no processes, Redis or plotting."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.scaling import load, main, parse_args, reproduce, settings_of
from bench.scaling_report import (
    RunResult,
    cumulative,
    efficiency,
    markdown,
    ratios,
    table,
    targets,
    to_json,
    wire_lines,
    wire_targets,
)


def run(crawler: str, n: int, rate: float, **kw: Any) -> RunResult:
    """A run of 60 s whose measured half (30 s) went at `rate` pages/s, shared evenly."""
    measured = 30.0
    pages = round(rate * measured)
    figures: dict[str, Any] = {
        "crawler": crawler,
        "n": n,
        "window": 60.0,
        "pages": 2 * pages,
        "timeline": cumulative((i * 60 / (2 * pages) for i in range(2 * pages)), 60),
        "measured_from": 30.0,
        "measured": measured,
        "measured_pages": pages,
        "per_peer": {f"p{i}": pages // n for i in range(n)},
        "cpu_crawler": pages * 0.003,
        "cpu_coordinator": 0.0,
        "cpu_server": pages * 0.0007,
        "cpus": 2,
        "machine_busy": 0.5,
        "duplicates": 0,
        "overlaps": 0,
        "short_gaps": 0,
        "robots_violations": 0,
        "requests": 2 * pages + 500,
        "wire_frames": 0 if n == 1 else pages // 5,
        "wire_bytes": 0 if n == 1 else pages * 60,
        "wire_pages": pages,
        "forwarded_urls": 0 if n == 1 else pages // 2,
        "url_frames": 0 if n == 1 else pages // 6,
        "url_bytes": 0 if n == 1 else pages * 50,
        "cross_links": 0 if n == 1 else pages,
        "foreign_links": 0 if n == 1 else pages // 2,
    }
    figures.update(kw)
    return RunResult(**figures)


def test_cumulative_counts_by_second() -> None:
    assert cumulative([0.0, 0.2, 1.0, 1.5, 2.9, 7.0], 3) == [1, 3, 4, 5]
    assert cumulative([], 2) == [0, 0, 0]


def test_efficiency_is_rate_over_n_times_the_single_rate() -> None:
    one = run("ubipy", 1, 34.0)
    eight = run("ubipy", 8, 8 * 34.0 * 0.95)
    assert efficiency(one, one) == pytest.approx(1.0)
    assert efficiency(eight, one) == pytest.approx(0.95, abs=0.01)
    assert efficiency(eight, None) is None
    assert eight.max_mean == pytest.approx(1.0)
    assert eight.peer_rates()[0] == pytest.approx(eight.peer_rates()[-1])
    # A process that fetched nothing still counts in the mean and as a rate of 0.
    lopsided = run("ubipy", 2, 40.0, per_peer={"p0": 1200})
    assert lopsided.max_mean == pytest.approx(2.0)
    assert lopsided.peer_rates()[0] == 0.0


def test_table_ratios_and_targets() -> None:
    results = [
        run("ubipy", 1, 34.0),
        run("ubipy", 8, 260.0, machine_busy=0.7),
        run("scrapy-redis", 1, 6.0, cpu_crawler=180 * 0.012),
        run("scrapy-redis", 8, 48.0, cpu_crawler=1440 * 0.012, overlaps=1164),
    ]
    text = table(results)
    lines = text.splitlines()
    assert len(lines) == 2 + len(results)
    assert lines[2].startswith("| ubipy | 1 |")
    assert lines[-1].startswith("| scrapy-redis | 8 |")
    assert "| 0.96 |" in lines[3]  # 260 / (8 x 34)
    assert "1164" in lines[-1]
    assert ratios(results)[1].startswith("N=8: ubipy pages/s / scrapy-redis pages/s = 5.42")
    verdicts = targets(results)
    assert verdicts[0].startswith("MET: ubipy's efficiency at N=8 is 0.96")
    assert all(v.startswith("MET") for v in verdicts), verdicts
    assert wire_lines(results)[0].startswith("ubipy N=8: 0.50 URLs forwarded per page")


def test_targets_say_when_they_are_not_met() -> None:
    results = [
        run("ubipy", 1, 34.0),
        run("ubipy", 2, 68.0),
        run("ubipy", 8, 200.0, machine_busy=0.95, duplicates=1, wire_bytes=8000 * 200),
        run("scrapy-redis", 8, 240.0),
    ]
    verdicts = targets(results)
    assert verdicts[0].startswith("NOT MET: ubipy's efficiency at N=8 is 0.74")
    assert "(saturated)" in verdicts[0]
    assert verdicts[1].startswith("NOT MET: ubipy 0 duplicates")
    assert verdicts[2].startswith("NOT MET: ubipy pages/s >= scrapy-redis's")
    # Every frame but the URL batches grew 20-fold per page at N=8 (10 B to 217 B).
    assert verdicts[-2].startswith("NOT MET: no wire cost that grows with N")
    assert verdicts[-1].startswith("  wire bytes per page (N=2: 60 B, N=8: 267 B)")
    assert "(saturated)" in table(results)


def wire_run(n: int, foreign_share: float, per_link: float, other: float) -> RunResult:
    """A run at 40 pages/s a peer whose pages hold 0.6 links to other hosts, `foreign_share`
    of them into another peer's hosts, each costing `per_link` bytes, and `other` bytes a
    page of every other frame."""
    result = run("ubipy", n, 40.0 * n)
    result.wire_pages = result.pages
    foreign = round(0.6 * result.pages * foreign_share)
    url_bytes = round(foreign * per_link)
    result.cross_links = round(0.6 * result.pages)
    result.foreign_links = foreign
    result.url_bytes = url_bytes
    result.wire_bytes = url_bytes + round(other * result.wire_pages)
    return result


def test_wire_bytes_per_page_may_follow_the_share_of_links_into_other_peers() -> None:
    # (N-1)/N of the links: per page 1.46 times more at N=8 than at N=2, per link the same.
    same_cost = [wire_run(n, (n - 1) / n, 48.0, 9.0) for n in (2, 4, 8)]
    assert same_cost[-1].wire_bytes_per_page > 1.25 * same_cost[0].wire_bytes_per_page
    met, share = wire_targets(same_cost)
    assert met.startswith("MET: no wire cost that grows with N")
    assert "N=2: 48 B, N=4: 48 B, N=8: 48 B" in met
    assert "N=8: 0.53 per page, 0.88 of its links to other hosts ((N-1)/N = 0.88)" in share
    assert share.endswith("at most 0.60 links to other hosts x 48 B + 9 B = 38 B per page")
    # Each link costing more at N=8 (say, a frame per URL) is a cost that grows with N ...
    dearer = [wire_run(2, 0.5, 48.0, 9.0), wire_run(8, 0.88, 70.0, 9.0)]
    assert wire_targets(dearer)[0].startswith("NOT MET")
    # ... and so is membership traffic per page that grows with the cluster.
    chattier = [wire_run(2, 0.5, 48.0, 9.0), wire_run(8, 0.88, 48.0, 12.0)]
    assert wire_targets(chattier)[0].startswith("NOT MET")
    # Cheaper at a larger N is not growth.
    cheaper = [wire_run(2, 0.5, 48.0, 9.0), wire_run(8, 0.88, 30.0, 5.0)]
    assert wire_targets(cheaper)[0].startswith("MET")


def test_results_without_link_counts_fall_back_to_bytes_per_page() -> None:
    old = [wire_run(n, (n - 1) / n, 48.0, 9.0) for n in (2, 8)]
    for r in old:
        r.foreign_links = r.cross_links = 0
    (line,) = wire_targets(old)
    assert line.startswith("NOT MET: wire bytes per page flat as N grows (N=2: 23 B, N=8: 34 B)")


def test_results_render_again_from_their_json(tmp_path: Path) -> None:
    results = [run("ubipy", 1, 34.0), run("ubipy", 2, 67.0)]
    args = parse_args(["--peers", "1,2", "--only", "ubipy", "--peer-args=--batch-linger 1.0"])
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps(to_json(results, settings_of(args))))
    again, settings = load(path)
    assert again == results
    assert settings.ns == [1, 2] and settings.peer_args == "--batch-linger 1.0"
    main(["--render", str(path), "--out", str(tmp_path / "out")])
    assert (tmp_path / "out" / "scaling.md").read_text().startswith("Synthetic web: 500 hosts")


def test_markdown_and_json(tmp_path: Path) -> None:
    results = [run("ubipy", 1, 34.0), run("ubipy", 2, 67.0, notes=["a note"])]
    md = markdown(results, ["a header"])
    assert md.startswith("a header\n\n| crawler |")
    assert "- ubipy N=2: a note" in md
    data = to_json(results, {"duration": 60})
    path = tmp_path / "scaling.json"
    path.write_text(json.dumps(data))
    back = json.loads(path.read_text())
    assert back["runs"][1]["efficiency"] == pytest.approx(67 / 68, abs=0.01)
    assert back["runs"][1]["per_peer"] == {"p0": 1005, "p1": 1005}


def test_arguments_and_the_command_that_reproduces_a_run() -> None:
    args = parse_args([])
    assert args.ns == [1, 2, 4, 8]
    assert args.crawlers == ["ubipy", "scrapy-redis"]
    assert args.hosts >= 400
    assert args.latency_min == pytest.approx(0.04)
    assert args.latency_span == pytest.approx(0.02)
    assert reproduce(args) == "python -m bench.scaling"
    quick = parse_args(["--peers", "1,2", "--duration", "10", "--only", "ubipy"])
    assert reproduce(quick) == "python -m bench.scaling --peers=1,2 --only=ubipy --duration=10.0"
    linger = parse_args(["--peer-args=--batch-linger 1.0"])
    assert reproduce(linger) == "python -m bench.scaling '--peer-args=--batch-linger 1.0'"
    with pytest.raises(SystemExit):
        parse_args(["--only", "nutch"])


def test_links_into_another_peers_hosts_come_from_the_web_and_the_ring() -> None:
    from bench.scaling_run import link_counts
    from ubipy.synthweb import SyntheticWeb, WebSpec
    from ubipy.synthweb.model import ordinary_path

    web = SyntheticWeb(WebSpec(seed=3, hosts=40, pages_per_host=30, crawl_delay=0))
    urls = [web.url(h, ordinary_path(p)) for h in range(40) for p in range(0, 30, 3)]
    cross, alone = link_counts(web, [(u, "a") for u in urls], ["a"])
    assert cross > 50 and alone == 0
    # With two peers each link to another host points into one of them: it is foreign
    # to exactly one, whichever fetched the page.
    as_a = link_counts(web, [(u, "a") for u in urls], ["a", "b"])
    as_b = link_counts(web, [(u, "b") for u in urls], ["a", "b"])
    assert as_a[0] == as_b[0] == cross
    assert as_a[1] + as_b[1] == cross and 0 < as_a[1] < cross
