"""Separate processes, with different hash salts, agree on every owner."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys

from ubipy.ring import ModuloPlacement, Ring, TwoLevelPlacement

MEMBERS = [f"peer-{i:02d}" for i in range(12)] + ["例え.jp", "node:7000"]

# Each child gets the members in a different order and a different PYTHONHASHSEED,
# so an accidental use of hash() or of set/dict iteration order would show.
CHILD = """
import hashlib, random, sys
from ubipy.ring import ModuloPlacement, Ring, TwoLevelPlacement
members = sys.argv[1].split(",")
random.Random(int(sys.argv[2])).shuffle(members)
hosts = [f"h{i:05d}.synth.test" for i in range(10_000)]
digest = hashlib.sha256()
for placement in (Ring(members), ModuloPlacement(members), TwoLevelPlacement(members)):
    digest.update("\\n".join(placement.owner(h) for h in hosts).encode())
print(digest.hexdigest())
"""


def owners_digest_here() -> str:
    hosts = [f"h{i:05d}.synth.test" for i in range(10_000)]
    digest = hashlib.sha256()
    for placement in (Ring(MEMBERS), ModuloPlacement(MEMBERS), TwoLevelPlacement(MEMBERS)):
        digest.update("\n".join(placement.owner(h) for h in hosts).encode())
    return digest.hexdigest()


def run_child(hash_seed: str, shuffle_seed: int) -> str:
    env = dict(os.environ, PYTHONHASHSEED=hash_seed)
    result = subprocess.run(
        [sys.executable, "-c", CHILD, ",".join(MEMBERS), str(shuffle_seed)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return result.stdout.strip()


def test_two_processes_compute_identical_owners() -> None:
    first = run_child("1", 1)
    second = run_child("2", 2)
    assert first == second == owners_digest_here()
