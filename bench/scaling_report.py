"""The scaling harness's figures and summaries: what a run measured (`RunResult`), the
efficiency, the ratios and targets, and the Markdown table, the JSON and the PNG chart.

No processes here: `bench.scaling_run` measures the runs and `bench.scaling` (the command)
writes what this module makes of them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

CRAWLERS = ("ubipy", "scrapy-redis")
# A run whose machine was busier than this was bound by the CPU, not by its links.
SATURATED = 0.9


# -- what a run measured -------------------------------------------------------------


@dataclass
class RunResult:
    """One crawler at one N. Rates, CPU and the machine's load are measured over the
    second half of the run (the first half includes the warm-up: the web's home page links
    to every host, so each host's robots.txt comes first); pages over time and the wire
    figures cover the whole run."""

    crawler: str
    n: int
    window: float  # seconds the run lasted, from the web's first request
    pages: int  # non-robots responses completed in the run (the web's log)
    timeline: list[int]  # cumulative pages at 0, 1, 2, ... s
    measured_from: float  # seconds into the run where the measured half starts
    measured: float  # its length in seconds
    measured_pages: int  # pages completed in it
    per_peer: dict[str, int]  # the same, by process
    cpu_crawler: float  # CPU s of the crawler's processes in it (Redis included)
    cpu_coordinator: float  # of which Redis's (0 for ubipy)
    cpu_server: float  # the synthetic web's
    cpus: int
    machine_busy: float  # all CPUs' busy share in it, whoever used them
    duplicates: int
    overlaps: int
    short_gaps: int
    robots_violations: int
    requests: int  # every request in the log, robots.txt and after the run included
    wire_frames: int  # frames between peers (ubipy) or Redis commands (scrapy-redis)
    wire_bytes: int  # their bytes (scrapy-redis: Redis's input + output)
    wire_pages: int  # pages the wire figures are divided by (the crawler's own count)
    url_frames: int = 0  # ubipy: URL_BATCH + URL_ACK frames
    url_bytes: int = 0
    forwarded_urls: int = 0  # ubipy: URLs sent to their owner
    # ubipy, from the web's model: links to another host on the run's pages (once per
    # page), and those of them into a host that the ring gives another peer.
    cross_links: int = 0
    foreign_links: int = 0
    measured_requests: int = 0  # every request completed in the measured half (robots.txt too)
    on_wire: float = 0.0  # seconds of requests in flight at the web in it, added up
    exhausted: bool = False
    notes: list[str] = field(default_factory=list)
    # Voluntary context switches of the crawler's processes in the measured half: each
    # is a sleep and a wake-up, which costs CPU of its own (bench/wakeups.py).
    wakeups_crawler: int = 0

    @property
    def rate(self) -> float:
        """Pages/s in the measured half."""
        return self.measured_pages / max(self.measured, 1e-9)

    @property
    def in_flight(self) -> float:
        """Mean requests in flight at the web per process in the measured half: how much of
        its concurrency a process keeps on the wire (at most --concurrency)."""
        return self.on_wire / max(self.measured * self.n, 1e-9)

    @property
    def whole_rate(self) -> float:
        return self.pages / max(self.window, 1e-9)

    def peer_rates(self) -> list[float]:
        rates = [p / max(self.measured, 1e-9) for p in self.per_peer.values()]
        return sorted(rates + [0.0] * (self.n - len(rates)))

    @property
    def max_mean(self) -> float:
        counts = list(self.per_peer.values()) + [0] * (self.n - len(self.per_peer))
        mean = statistics.mean(counts) if counts else 0.0
        return max(counts) / mean if mean else 0.0

    @property
    def cpu_ms_per_page(self) -> float:
        return 1000 * self.cpu_crawler / max(self.measured_pages, 1)

    @property
    def wakeups_per_page(self) -> float:
        return self.wakeups_crawler / max(self.measured_pages, 1)

    @property
    def own_busy(self) -> float:
        """This run's processes (crawler and web) as a share of all the machine's CPUs."""
        return (self.cpu_crawler + self.cpu_server) / max(self.measured * self.cpus, 1e-9)

    @property
    def saturated(self) -> bool:
        return self.machine_busy >= SATURATED

    @property
    def wire_frames_per_page(self) -> float:
        return self.wire_frames / max(self.wire_pages, 1)

    @property
    def wire_bytes_per_page(self) -> float:
        return self.wire_bytes / max(self.wire_pages, 1)

    @property
    def url_bytes_per_link(self) -> float:
        """URL_BATCH + URL_ACK bytes per link into another peer's hosts."""
        return self.url_bytes / max(self.foreign_links, 1)

    @property
    def other_bytes_per_page(self) -> float:
        """Every other frame (membership, monitoring, status) per page."""
        return (self.wire_bytes - self.url_bytes) / max(self.wire_pages, 1)


def efficiency(result: RunResult, base: RunResult | None) -> float | None:
    """rate(N) / (N × rate(1)); None without a run at N=1 for the same crawler."""
    if base is None or base.rate <= 0:
        return None
    return result.rate / (result.n * base.rate)


def base_of(results: Sequence[RunResult], crawler: str) -> RunResult | None:
    return next((r for r in results if r.crawler == crawler and r.n == 1), None)


def cumulative(times: Iterable[float], seconds: int) -> list[int]:
    """Cumulative counts at 0, 1, ..., `seconds` of events at `times` (seconds from 0)."""
    per_second = [0] * (seconds + 1)
    for t in times:
        if 0 <= t <= seconds:
            per_second[min(seconds, math.ceil(t))] += 1
    out, total = [], 0
    for count in per_second:
        total += count
        out.append(total)
    return out


# -- the report ----------------------------------------------------------------------


def fmt(value: float | None, spec: str = ".2f") -> str:
    return "–" if value is None else format(value, spec)


def table(results: Sequence[RunResult]) -> str:
    lines = [
        "| crawler | N | pages in the run | pages/s | per process pages/s (min–max) "
        "| max/mean | efficiency | in flight per process | CPU ms/page | machine CPU busy "
        "| duplicates | overlaps | short gaps | wire frames/page | wire B/page |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in sorted(results, key=lambda r: (CRAWLERS.index(r.crawler), r.n)):
        rates = r.peer_rates()
        eff = efficiency(r, base_of(results, r.crawler))
        busy = f"{100 * r.machine_busy:.0f}%" + (" (saturated)" if r.saturated else "")
        lines.append(
            f"| {r.crawler} | {r.n} | {r.pages:,} | {r.rate:,.0f} "
            f"| {rates[0]:.0f}–{rates[-1]:.0f} | {r.max_mean:.2f} | {fmt(eff)} "
            f"| {r.in_flight:.2f} | {r.cpu_ms_per_page:.2f} | {busy} | {r.duplicates} "
            f"| {r.overlaps} | {r.short_gaps} | {r.wire_frames_per_page:.3f} "
            f"| {r.wire_bytes_per_page:.0f} |"
        )
    return "\n".join(lines)


def ratios(results: Sequence[RunResult]) -> list[str]:
    """ubipy against scrapy-redis at each N: pages/s and CPU per page."""
    out = []
    for ours in sorted((r for r in results if r.crawler == "ubipy"), key=lambda r: r.n):
        theirs = next((r for r in results if r.crawler == "scrapy-redis" and r.n == ours.n), None)
        if theirs is None:
            continue
        speed = ours.rate / max(theirs.rate, 1e-9)
        cpu = theirs.cpu_ms_per_page / max(ours.cpu_ms_per_page, 1e-9)
        out.append(
            f"N={ours.n}: ubipy pages/s / scrapy-redis pages/s = {speed:.2f}; "
            f"scrapy-redis CPU per page / ubipy's = {cpu:.2f}"
        )
    return out


def verdict(ok: bool) -> str:
    return "MET" if ok else "NOT MET"


# A wire figure grows with N when its value at a larger N is more than this many times
# its value at the smallest N with a wire (N=2).
GROWTH_BAND = 1.25


def _grows(values: Sequence[float]) -> bool:
    return max(values[1:]) > GROWTH_BAND * values[0]


def wire_targets(multi: Sequence[RunResult]) -> list[str]:
    """The issue's "wire bytes per page stay flat as N grows (no coordination cost that
    grows with N)", for ubipy's runs with N > 1 in order of N.

    A peer hands on the links that point into another peer's hosts: about (N-1)/N of a
    page's links to other hosts. That share grows with N for any crawler that places hosts
    on peers, and is bounded by the links themselves; what must not grow is what each such
    link costs, and every other frame (membership, monitoring) per page."""
    per_page = [r.wire_bytes_per_page for r in multi]
    pages = ", ".join(f"N={r.n}: {b:.0f} B" for r, b in zip(multi, per_page, strict=True))
    if not all(r.foreign_links for r in multi):  # results from before links were counted
        flat = max(per_page) <= GROWTH_BAND * min(per_page)
        return [f"{verdict(flat)}: wire bytes per page flat as N grows ({pages})"]
    per_link = [r.url_bytes_per_link for r in multi]
    other = [r.other_bytes_per_page for r in multi]
    ok = not _grows(per_link) and not _grows(other)
    cross = max(r.cross_links / max(r.pages, 1) for r in multi)
    bound = cross * max(per_link) + max(other)
    shares = ", ".join(
        f"N={r.n}: {r.foreign_links / max(r.pages, 1):.2f} per page, "
        f"{r.foreign_links / max(r.cross_links, 1):.2f} of its links to other hosts "
        f"((N-1)/N = {(r.n - 1) / r.n:.2f})"
        for r in multi
    )
    return [
        f"{verdict(ok)}: no wire cost that grows with N: URL batches and acks per link into "
        "another peer's hosts "
        + ", ".join(f"N={r.n}: {b:.0f} B" for r, b in zip(multi, per_link, strict=True))
        + "; every other frame per page "
        + ", ".join(f"N={r.n}: {b:.1f} B" for r, b in zip(multi, other, strict=True))
        + f" (neither above {GROWTH_BAND}x its N={multi[0].n} value)",
        f"  wire bytes per page ({pages}) follow the links into another peer's hosts: "
        f"{shares}; at any N at most {cross:.2f} links to other hosts x {max(per_link):.0f} B "
        f"+ {max(other):.0f} B = {bound:.0f} B per page",
    ]


def targets(results: Sequence[RunResult]) -> list[str]:
    """The issue's targets, each with MET or NOT MET and its figures."""
    out: list[str] = []
    ubipy = sorted((r for r in results if r.crawler == "ubipy"), key=lambda r: r.n)
    if not ubipy:
        return out
    top = ubipy[-1]
    eff = efficiency(top, base_of(results, "ubipy"))
    if eff is not None and top.n > 1:
        cpu = "saturated" if top.saturated else "not saturated"
        out.append(
            f"{verdict(eff >= 0.9 and not top.saturated)}: ubipy's efficiency at N={top.n} "
            f"is {eff:.2f} (target >= 0.9), machine CPU {100 * top.machine_busy:.0f}% busy "
            f"({cpu})"
        )
    clean = all(r.duplicates == 0 and r.overlaps == 0 and r.short_gaps == 0 for r in ubipy)
    out.append(
        f"{verdict(clean)}: ubipy 0 duplicates and 0 politeness violations at every N ("
        + ", ".join(f"N={r.n}: {r.duplicates}/{r.overlaps}/{r.short_gaps}" for r in ubipy)
        + " duplicates/overlaps/short gaps)"
    )
    pairs = [(r, t) for r in ubipy for t in results if t.crawler == "scrapy-redis" and t.n == r.n]
    if pairs:
        faster = all(r.rate >= t.rate for r, t in pairs)
        cheaper = all(r.cpu_ms_per_page < t.cpu_ms_per_page for r, t in pairs)
        out.append(
            f"{verdict(faster)}: ubipy pages/s >= scrapy-redis's at every N ("
            + ", ".join(f"N={r.n}: {r.rate:.0f} vs {t.rate:.0f}" for r, t in pairs)
            + ")"
        )
        out.append(
            f"{verdict(cheaper)}: ubipy fewer CPU s per page at every N ("
            + ", ".join(
                f"N={r.n}: {r.cpu_ms_per_page:.2f} vs {t.cpu_ms_per_page:.2f} ms" for r, t in pairs
            )
            + ")"
        )
    multi = [r for r in ubipy if r.n > 1]
    if len(multi) >= 2:
        out += wire_targets(multi)
    return out


def wire_lines(results: Sequence[RunResult]) -> list[str]:
    """What ubipy's peers sent each other, per page and per forwarded URL."""
    out = []
    for r in sorted((r for r in results if r.crawler == "ubipy" and r.n > 1), key=lambda r: r.n):
        urls = max(r.forwarded_urls, 1)
        # Fewer than the links: a peer does not send a URL it sent lately.
        per_link = (
            f" ({r.forwarded_urls / r.foreign_links:.2f} per link into another peer's hosts)"
            if r.foreign_links
            else ""
        )
        out.append(
            f"ubipy N={r.n}: {r.forwarded_urls / max(r.wire_pages, 1):.2f} URLs forwarded per "
            f"page{per_link}, {r.url_frames / urls:.2f} URL_BATCH+URL_ACK frames and "
            f"{r.url_bytes / urls:.0f} bytes per forwarded URL; all frames "
            f"{r.wire_frames_per_page:.2f} and {r.wire_bytes_per_page:.0f} B per page"
        )
    return out


def markdown(results: Sequence[RunResult], header: Sequence[str]) -> str:
    parts = [*header, "", table(results), ""]
    if rs := ratios(results):
        parts += ["Ratios:", "", *[f"- {line}" for line in rs], ""]
    if ws := wire_lines(results):
        parts += ["Wire:", "", *[f"- {line}" for line in ws], ""]
    if ts := targets(results):
        parts += ["Targets:", "", *[f"- {line}" for line in ts], ""]
    notes = [f"- {r.crawler} N={r.n}: {note}" for r in results for note in r.notes]
    if notes:
        parts += ["Notes:", "", *notes, ""]
    return "\n".join(parts)


def to_json(results: Sequence[RunResult], settings: dict[str, Any]) -> dict[str, Any]:
    runs = []
    for r in results:
        row = asdict(r)
        row.update(
            rate=r.rate,
            peer_rates=r.peer_rates(),
            max_mean=r.max_mean,
            efficiency=efficiency(r, base_of(results, r.crawler)),
            cpu_ms_per_page=r.cpu_ms_per_page,
            wakeups_per_page=r.wakeups_per_page,
            own_busy=r.own_busy,
            saturated=r.saturated,
            in_flight=r.in_flight,
            wire_frames_per_page=r.wire_frames_per_page,
            wire_bytes_per_page=r.wire_bytes_per_page,
        )
        runs.append(row)
    return {
        "settings": settings,
        "runs": runs,
        "ratios": ratios(results),
        "targets": targets(results),
    }


def chart(
    results: Sequence[RunResult], path: Path, title: str, ceiling: float | None = None
) -> bool:
    """Cumulative pages over time for each N (ubipy solid, scrapy-redis dashed), and each
    process's pages/s at each N against the link's `ceiling` (concurrency / latency).
    False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    ns = sorted({r.n for r in results})
    colours = {n: f"C{i}" for i, n in enumerate(ns)}
    styles = {"ubipy": "-", "scrapy-redis": "--"}
    fig, (left, right) = plt.subplots(1, 2, figsize=(13, 5.2), width_ratios=(3, 2))
    for r in sorted(results, key=lambda r: (r.n, CRAWLERS.index(r.crawler))):
        left.plot(
            range(len(r.timeline)),
            r.timeline,
            styles[r.crawler],
            color=colours[r.n],
            label=f"{r.crawler}, N={r.n}",
        )
    left.set_xlabel("seconds since the first request")
    left.set_ylabel("pages fetched (cumulative)")
    left.set_title("pages over time")
    left.grid(alpha=0.3)
    left.legend(fontsize=8, ncol=2)
    offsets = {"ubipy": -0.12, "scrapy-redis": 0.12}
    markers = {"ubipy": "o", "scrapy-redis": "x"}
    for crawler in CRAWLERS:
        xs: list[float] = []
        ys: list[float] = []
        for r in results:
            if r.crawler == crawler:
                rates = r.peer_rates()
                xs += [ns.index(r.n) + offsets[crawler]] * len(rates)
                ys += rates
        if xs:
            right.scatter(xs, ys, marker=markers[crawler], label=crawler, alpha=0.8)
    if ceiling is not None:
        right.axhline(ceiling, color="grey", linestyle=":", label="link ceiling")
    right.set_xticks(range(len(ns)), [str(n) for n in ns])
    right.set_xlabel("N (processes)")
    right.set_ylabel("pages/s of each process")
    right.set_ylim(bottom=0)
    right.set_title("per-process rates")
    right.grid(alpha=0.3)
    right.legend(fontsize=8)
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True
