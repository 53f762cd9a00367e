"""What ``ubipy export`` says it wrote: the records, the pages and sitemaps apart (as
``ubipy status`` counts them), the later visits, and what was left out and why."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ubipy.wording import counted, listed

if TYPE_CHECKING:
    from ubipy.store import ExportSummary

__all__ = ["export_said"]

_WHY = "failed requests, types not accepted or bodies not kept"


def export_said(summary: ExportSummary, unit: str, where: str) -> str:
    """The summary line of an export of ``unit`` records ("WARC record") to ``where``."""
    # A sitemap left out was counted as a page (QA: "10 more pages" of 9 and a sitemap).
    pages_out = summary.left_out - summary.sitemaps_left_out
    gone = [counted(pages_out, "more page")] if pages_out else []
    if summary.sitemaps_left_out:
        gone.append(counted(summary.sitemaps_left_out, "sitemap"))
    left_out = f"; {listed(gone)} left out ({_WHY})" if summary.left_out else ""
    if summary.visits_left_out:
        left_out += f"; {counted(summary.visits_left_out, 'later visit')} left out"
    # The pages written (those left out were counted), the sitemaps apart (QA).
    what = [counted(summary.pages - summary.left_out - summary.sitemaps, "page")]
    if summary.sitemaps:
        what.append(counted(summary.sitemaps, "sitemap"))
    # Those written: the visits read, less those left out (QA: "635 later visits ...;
    # 325 later visits left out" of a file with 310).
    if visits := summary.visits - summary.visits_left_out:
        what.append(counted(visits, "later visit"))
    return (
        f"wrote {counted(summary.records, unit)} for {listed(what)} from "
        f"{counted(summary.shards, 'shard')} to {where}{left_out}"
    )
