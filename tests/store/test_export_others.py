"""An output never takes the files of a peer the command does not read: another peer's
shard was written over with JSON, its WARC file replaced, and a peer's own WARC
directory as an output had its files linked onto themselves (QA)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from tests.store.test_export import PAGES_A, PAGES_B, PEER_A, PEER_B, _make_shard
from ubipy.cli import main
from ubipy.store.shard import SHARD_FILE


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        (f"other/{SHARD_FILE}", "jsonl"),
        ("other/warc/ubipy-b1b1-20261206-00001.warc.gz", "warc"),
        ("other", "warc"),  # its data directory
        ("other/warc", "warc"),
        ("mine.db", "jsonl"),  # an SQLite database, anyone's
        # Not there yet, and still the peer's: SQLite takes a journal of that name as
        # the shard's (the next export refused it, the next start deleted the file),
        # and `ubipy index` a WARC file there as the peer's (QA).
        (f"other/{SHARD_FILE}-journal", "jsonl"),
        ("other/warc/mine.warc.gz", "warc"),
        ("read/warc/mine.warc.gz", "warc"),
    ],
)
def test_an_output_that_is_another_peer_s_file_or_a_database_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], name: str, fmt: str
) -> None:
    read, other = tmp_path / "read", tmp_path / "other"
    _make_shard(read, PEER_A, PAGES_A)
    _make_shard(other, PEER_B, PAGES_B)
    (other / "warc").mkdir()
    (other / "warc" / "ubipy-b1b1-20261206-00001.warc.gz").write_bytes(b"a record")
    sqlite3.connect(tmp_path / "mine.db").execute("CREATE TABLE t (x)").connection.close()
    out = tmp_path / name
    theirs = [*other.rglob("*"), tmp_path / "mine.db"]
    before = {p: p.read_bytes() for p in theirs if p.is_file()}
    argv = ["export", "--data", str(read), "--format", fmt, "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"ubipy export: {out}: ") and "left as it is" in err, err
    assert {p: p.read_bytes() for p in theirs if p.is_file()} == before
    assert sorted(other.iterdir()) == sorted(p for p in theirs if p.parent == other)


def test_an_export_into_a_peer_s_data_directory_is_written_and_written_again(
    tmp_path: Path,
) -> None:
    data = tmp_path / "peer"
    _make_shard(data, PEER_A, PAGES_A)
    out = data / "pages.jsonl"
    for _ in range(2):  # the second over the first: the user's file, not the peer's
        assert main(["export", "--data", str(data), "--format", "jsonl", "--out", str(out)]) == 0
        assert out.read_text().count("\n") == len(PAGES_A)
