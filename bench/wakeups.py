"""What waking up costs on this machine: the same work, back to back and between sleeps.

    python bench/wakeups.py                   # gaps of 5, 27 and 50 ms
    python bench/wakeups.py --gaps 1,27 --rounds 500

A peer that crawls slowly (a polite crawl, the scaling harness's 2 requests in flight
at 50 ms each: about 37 pages a second) sleeps between pages, and each page begins with
a wake-up. On some machines, virtual ones above all, the process is charged CPU time for
the wake-up itself, and the work right after it runs slower (cold caches). Neither is
ubipy's code; both land in its CPU per page. This script measures them with no network
and no ubipy peer: the unit of work is parsing one page of 80 links with ubipy's own
parser, about what a page costs in Python besides its fetch.

For each gap it reports the process's CPU time (``time.process_time``) per round of:
the work alone, back to back; the work after a real sleep of the gap (``trio.sleep``:
the process leaves the CPU); the sleep alone, no work; and the work after a busy wait of
the gap (the process never leaves the CPU; the work alone is timed). The wake-up's
price is the work after a sleep minus the work back to back. A peer's wake-ups a page
are its voluntary context switches a page (``psutil.Process.num_ctx_switches``).

The last column is one system call a page makes: sending a request of 200 bytes on a
loopback TCP connection (whose reader, a thread blocked in ``recv``, is woken by it),
the sending thread's CPU time (``time.thread_time``) for the ``send`` alone, back to
back and after a sleep of the gap.
"""

from __future__ import annotations

import argparse
import socket
import statistics
import threading
import time
from collections.abc import Callable

import trio

from ubipy.fetch import parse_html

_PAGE = (
    b"<html><head><title>A page</title></head><body>"
    + b"".join(
        b'<p>Some words %d <a href="/p/%d.html">link %d</a></p>\n' % (i, i, i) for i in range(80)
    )
    + b"</body></html>"
)


def _work() -> None:
    parse_html(_PAGE, "http://h001.synth.test/p/1.html")


def _nothing() -> None:
    pass


def _after_sleeps(work: Callable[[], None], gap: float, rounds: int) -> float:
    """CPU seconds a round of ``work`` then a real sleep of ``gap``."""

    async def go() -> float:
        started = time.process_time()
        for _ in range(rounds):
            work()
            await trio.sleep(gap)
        return (time.process_time() - started) / rounds

    return trio.run(go)


def _after_busy_waits(gap: float, rounds: int) -> float:
    """CPU seconds of the work alone, each round after a busy wait of ``gap``."""
    spent = 0.0
    for _ in range(rounds):
        started = time.process_time()
        _work()
        spent += time.process_time() - started
        until = time.perf_counter() + gap
        while time.perf_counter() < until:
            pass
    return spent / rounds


def _sends(gap: float, rounds: int) -> float:
    """Median CPU seconds of one ``send`` of a request, each after a sleep of ``gap``."""
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname())
    reader, _ = listener.accept()
    listener.close()

    def read() -> None:
        while reader.recv(65536):
            pass

    thread = threading.Thread(target=read, daemon=True)
    thread.start()
    request = b"GET /p/1.html HTTP/1.1\r\nHost: h001.synth.test\r\nAccept: */*\r\n\r\n" * 3
    costs = []
    try:
        for _ in range(rounds):
            if gap:
                time.sleep(gap)
            started = time.thread_time()
            sender.sendall(request)
            costs.append(time.thread_time() - started)
    finally:
        sender.close()
        thread.join(5)
        reader.close()
    return statistics.median(costs)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gaps", default="5,27,50", help="milliseconds, comma-separated")
    parser.add_argument("--rounds", type=int, default=300, help="rounds per gap")
    args = parser.parse_args()
    gaps = [float(g) / 1000 for g in args.gaps.split(",")]
    back_to_back = _after_sleeps(_work, 0, args.rounds * 10)
    print(f"the work back to back: {back_to_back * 1e6:.0f} us of CPU a round")
    print(f"a send back to back: {_sends(0, args.rounds * 10) * 1e6:.0f} us (median)\n")
    print(
        "| gap | work after a sleep | the sleep alone | work after a busy wait | wake-up's price "
        "| a send after a sleep |"
    )
    print("|---:|---:|---:|---:|---:|---:|")
    for gap in gaps:
        slept = _after_sleeps(_work, gap, args.rounds)
        alone = _after_sleeps(_nothing, gap, args.rounds)
        busy = _after_busy_waits(gap, args.rounds)
        print(
            f"| {gap * 1000:.0f} ms | {slept * 1e6:.0f} us | {alone * 1e6:.0f} us "
            f"| {busy * 1e6:.0f} us | {(slept - back_to_back) * 1e6:.0f} us "
            f"| {_sends(gap, args.rounds) * 1e6:.0f} us |",
            flush=True,
        )
    print(f"\nreproduce: python bench/wakeups.py --gaps {args.gaps} --rounds {args.rounds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
