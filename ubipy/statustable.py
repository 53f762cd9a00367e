"""``ubipy status`` as text: the cluster's STATUS answer as the dashboard's table, one
row per member, the totals, and below them what each peer left out or found slow."""

from __future__ import annotations

import contextlib
import json
import shlex
from collections.abc import Mapping, Sequence
from typing import Any

from ubipy.control import FiguresBook, totals
from ubipy.progress import human_bytes, human_duration, wall_clock
from ubipy.wording import counted

_COLUMNS = (
    "peer", "address", "state", "started", "uptime", "pages", "pages/s", "errors",
    "time-outs", "frontier", "hosts", "bytes in", "bytes out",
)  # fmt: skip
_LEFT_ALIGNED = 3  # the first columns are text; the rest are figures
_SINCE = "(pages, errors, time-outs, bytes: since each peer started; hosts: those it schedules)"


def _left_out(figures: Mapping[str, Any]) -> str:
    """What the filters, --scope, --accept and the sitemap protocol's limits left out
    (out of scope and the sitemaps' cuts were only in the log: QA), the sitemaps
    fetched, the URLs closed without a request and why, the certificates that failed,
    what the DNS stage did, and a continuous crawl's refreshes, if anything."""
    parts = []
    if n := figures.get("excluded"):
        parts.append(f"{n} excluded by --exclude")
    if n := figures.get("not_included"):
        parts.append(f"{n} matching no --include")
    if n := figures.get("too_deep"):
        parts.append(f"{n} deeper than --max-depth")
    if n := figures.get("skipped_by_type"):
        types = figures.get("skipped_types")
        parts.append(f"{counted(n, 'answer')} of types not accepted ({types})")
    if n := figures.get("refreshes"):
        # Its pages column counts these visits too.
        unchanged = figures.get("refreshes_unchanged")
        barred = figures.get("refreshes_barred", 0)
        parts.append(
            f"{counted(n, 'refresh', 'refreshes')} of pages fetched before ({unchanged} "
            f"unchanged, {figures.get('refreshes_not_modified')} of them 304s; "
            f"{counted(figures.get('pages_retired', 0), 'page')} retired"
            + (f"; {barred} put off, robots.txt forbidding or not to be had)" if barred else ")")
        )
    if n := figures.get("skipped"):
        # A host given up (its robots.txt unreachable, a proxy that refuses) shows here.
        parts.append(f"{counted(n, 'URL')} closed unasked ({figures.get('skipped_why')})")
    if n := figures.get("given_up"):
        # Fetched, and counted as pages, but their last answer was still "not now" (QA).
        why = figures.get("given_up_why")
        parts.append(f"{counted(n, 'page')} given up after --retries (status {why})")
    if n := figures.get("out_of_scope"):
        parts.append(f"{counted(n, 'link')} outside --scope (each time seen)")
    if n := figures.get("sitemaps"):
        # Not in the pages column, but an export's records (QA: 173 pages, 188 exported).
        urls = counted(figures.get("sitemap_urls", 0), "URL")
        parts.append(f"{counted(n, 'sitemap')} fetched beside the pages ({urls} listed)")
    if n := figures.get("sitemap_skipped"):
        parts.append(f"{counted(n, 'sitemap entry', 'sitemap entries')} past the protocol's limits")
    if n := figures.get("sitemaps_cut"):
        parts.append(f"{counted(n, 'sitemap')} read in part (past 50 MB or the body cap)")
    if n := figures.get("sitemaps_faulty"):
        parts.append(f"{counted(n, 'sitemap')} read up to a fault (malformed; -v says which)")
    if n := figures.get("proxy_down"):
        # A proxy down, or a wrong --proxy: the crawl waited and said so only in the log.
        parts.append(f"{counted(n, 'request')} put back: the proxy could not be reached")
    if n := figures.get("no_sockets"):
        parts.append(f"{counted(n, 'request')} put back: out of file descriptors (ulimit -n)")
    if n := figures.get("certificate_errors"):
        parts.append(counted(n, "certificate error"))
    if n := figures.get("dns_hosts_given_up"):
        parts.append(f"{counted(n, 'host')} whose names did not resolve")
    if n := figures.get("refused_addresses"):
        parts.append(f"{counted(n, 'host')} on addresses not allowed (--allow-private)")
    if n := figures.get("dns_lookups"):
        most = figures.get("dns_most_per_host", 0)
        parts.append(f"{counted(n, 'DNS lookup')}, at most {most} for one host")
    return "; ".join(parts)


def format_cluster(report: dict[str, Any], now: float | None = None) -> str:
    """The cluster STATUS answer as the dashboard's table: one row per member, then
    the totals, then a line for each peer whose filters left something out. A member
    that did not answer (dead, left, unreachable) shows its state and '-' for its
    figures. ``now`` is the wall clock (for the start times)."""
    figures = {p["peer_id"]: p for p in report["peers"] if isinstance(p, dict)}
    view = {
        m["id"]: {**figures.get(m["id"], {}), "address": m["address"], "state": m["state"]}
        for m in report["members"]
    }
    book = FiguresBook()
    book.update(view, 0.0)
    rows = book.rows(0.0)
    cells: list[list[str]] = []
    notes: dict[int, str] = {}
    # Below the totals: what each peer's filters left out (the table's shape is fixed).
    footer: list[str] = []
    for row in rows:
        head = [row.peer_id, row.address, row.state]
        if not row.reported:
            cells.append(head + ["-"] * (len(_COLUMNS) - len(head)))
            continue
        cells.append(
            [
                *head,
                wall_clock(row.started_at, now) if row.started_at is not None else "-",
                human_duration(row.uptime),
                *_figures(row.pages, row.pages_per_second, row.errors, row.timeouts),
                str(row.frontier),
                str(row.hosts),
                human_bytes(row.bytes_in),
                human_bytes(row.bytes_out),
            ]
        )
        mine = figures[row.peer_id]
        said = []
        if mine.get("storage_error"):
            said.append(f"  STORAGE FAILING, admission paused: {mine['storage_error']}")
        if mine.get("joining"):
            said.append(f"  joining (attempt {mine['joining']})")
        if mine.get("paused"):
            said.append(f"  PAUSED: {mine['paused']}")
        if mine.get("holding"):
            said.append(f"  HOLDING: {mine['holding']}")
        if left_out := _left_out(mine):
            footer.append(f"{row.peer_id}: {left_out}")
        footer.extend(row.slowest_lines())
        if said:
            notes[len(cells) - 1] = "\n".join(said)
    total = totals(rows)
    states = ", ".join(f"{n} {state}" for state, n in total.by_state.items() if n)
    cells.append(
        [
            f"total ({total.peers})",
            states,
            "",
            "",
            "",
            *_figures(total.pages, total.pages_per_second, total.errors, total.timeouts),
            str(total.frontier),
            str(total.hosts),
            human_bytes(total.bytes_in),
            human_bytes(total.bytes_out),
        ]
    )
    widths = [max(len(c[i]) for c in [list(_COLUMNS), *cells]) for i in range(len(_COLUMNS))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.ljust(w) if i < _LEFT_ALIGNED else v.rjust(w)
            for i, (v, w) in enumerate(zip(values, widths, strict=True))
        ).rstrip()

    lines = [line(_COLUMNS)]
    for i, values in enumerate(cells):
        lines.append(line(values))
        if i in notes:
            lines.append(notes[i])
    # QA: 18 pages read as the crawl's, where the shards held 3,642.
    lines.append(_SINCE)
    return "\n".join(lines + _settings_differ(figures) + footer)


def _settings_differ(figures: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Lines naming the settings the peers do not share (each crawls its own hosts
    its own way), each peer's value: none when they agree (or a peer says none)."""
    told: dict[str, dict[str, Any]] = {}
    for peer, f in figures.items():
        with contextlib.suppress(ValueError, TypeError):
            if isinstance(said := json.loads(f.get("settings") or "null"), dict):
                told[peer] = said
    names = sorted(
        {n for s in told.values() for n in s if len({t.get(n) for t in told.values()}) > 1}
    )
    if not names:
        return []
    lines = ["SETTINGS DIFFER between peers (each crawls its own hosts its own way):"]
    for peer, mine in sorted(told.items()):
        lines.append(f"  {peer}: " + " ".join(f"{n}={_shown(mine.get(n, '?'))}" for n in names))
    return lines


def _shown(value: object) -> str:
    """A setting's value as a shell takes it (a regex's backslashes were shown doubled:
    QA), and one not set as such, not as '' (QA)."""
    return "(none)" if value == "" else shlex.quote(str(value))


def _figures(pages: int, rate: float, errors: int, timeouts: int) -> list[str]:
    return [str(pages), f"{rate:.1f}", str(errors), str(timeouts)]
