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


def say_if_stalled(due: float | None, now: float, cpu: float = 0.0) -> bool:
    """Says, once a stall is over, that a timer due at ``due`` woke only at ``now``
    (``cpu``: the seconds of CPU the process used meanwhile); whether it did."""
    late = now - due if due is not None else 0.0
    if late <= STALLED:
        return False
    if cpu >= late / 2:
        # It ran, and its loop did not: "did not run" sent the operator looking for a
        # SIGSTOP or a paused machine (QA: a hostile page's parse).
        log.warning(
            "this peer's event loop was held %.0f s by its own work (%.0f s of CPU): the "
            "others may have taken it for dead; it catches up now",
            late,
            cpu,
        )
    else:
        log.warning(
            "this process did not run for %.0f s (stopped, paused or starved of CPU): the "
            "others may have taken it for dead; it catches up now",
            late,
        )
    return True
