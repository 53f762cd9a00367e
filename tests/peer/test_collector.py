"""The garbage collector as a peer's process sets it (in a process of its own: the
setting is the whole process's)."""

from __future__ import annotations

import json
import subprocess
import sys

_SCRIPT = """
import gc, json
from ubipy.peer import settle_collector
before = (gc.get_threshold(), gc.get_freeze_count())
settle_collector()
print(json.dumps([before, (gc.get_threshold(), gc.get_freeze_count())]))
"""


def test_a_peers_process_freezes_its_start_up_and_collects_in_full_less_often() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True, timeout=60
    ).stdout
    (threshold, frozen), (settled, frozen_after) = json.loads(out)
    assert frozen == 0 and frozen_after > 10_000  # the imports' objects, out of every scan
    assert settled == [threshold[0], threshold[1], 100]
