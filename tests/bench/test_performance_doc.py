"""docs/performance.md is what bench/performance_doc.py makes of bench/results/."""

from __future__ import annotations

from pathlib import Path

from bench.performance_doc import DOC, main, render


def test_the_committed_page_is_up_to_date() -> None:
    # After a benchmark run or an edit of the fixed text: python -m bench.performance_doc
    assert main(["--check"]) == 0


def test_it_renders_without_results(tmp_path: Path) -> None:
    page = render(tmp_path / "results", tmp_path / "docs" / "performance.md")
    assert page.startswith("# Performance\n")
    assert "No results yet: `python -m bench.scaling`" in page
    assert "## Bounded memory (`bench/memory.py`)" in page


def test_other_results_are_appended_as_they_are(tmp_path: Path) -> None:
    results = tmp_path / "results"
    results.mkdir()
    (results / "crawl.md").write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    out = tmp_path / "docs" / "performance.md"
    assert main(["--results", str(results), "--out", str(out)]) == 0
    page = out.read_text()
    assert "## `crawl.md`" in page
    assert "[`bench/results/crawl.md`](../results/crawl.md)" in page
    assert page.endswith("| 1 | 2 |\n")
    assert main(["--results", str(results), "--out", str(out), "--check"]) == 0


def test_the_page_links_the_chart_and_the_summary() -> None:
    page = DOC.read_text(encoding="utf-8")
    assert "](../bench/results/scaling.png)" in page
    assert "](../bench/results/scaling.md)" in page
