"""A process that did not run for a while (stopped with SIGSTOP, a virtual machine
paused, a machine swapping): said once it runs again. The others may have taken it for
dead meanwhile, and the frames it reads were sent long ago: its log said only that
they were stale, "sent_at is -89.8 s from now", which reads as a clock's skew (QA)."""

from __future__ import annotations

import logging

log = logging.getLogger("ubipy.peer")

# Late by more than this, a timer was not missed by the loop's own work: the process
# did not run. Membership's probes are due every second or so.
STALLED = 10.0


def say_if_stalled(due: float | None, now: float) -> bool:
    """Says, once a stall is over, that a timer due at ``due`` woke only at ``now``;
    whether it did."""
    if due is None or now - due <= STALLED:
        return False
    log.warning(
        "this process did not run for %.0f s (stopped, paused or starved of CPU): the "
        "others may have taken it for dead; it catches up now",
        now - due,
    )
    return True
