"""The router batches foreign URLs per owner and keeps them until acknowledged."""

from __future__ import annotations

import itertools

import pytest
import trio
import trio.testing

from ubipy.peer.forwarding import Forwarder
from ubipy.peer.router import Router
from ubipy.ring import Ring
from ubipy.store.shard import NewURL
from ubipy.wire import Message, UrlAck, UrlBatch


def _url(i: int, host: str) -> NewURL:
    return NewURL(fp=i, url=f"http://{host}/{i}", host=host, depth=1)


def _hosts_of(ring: Ring, owner: str, n: int) -> list[str]:
    hosts = [f"h{i}.test" for i in range(2000)]
    return [h for h in hosts if ring.owner(h) == owner][:n]


def test_local_urls_stay_and_foreign_ones_are_batched_per_owner() -> None:
    ring = Ring(["a", "b", "c"])
    router = Router("a", ring, batch_size=3, linger=0.1)
    mine = _hosts_of(ring, "a", 2)
    theirs = _hosts_of(ring, "b", 4)
    urls = [_url(i, h) for i, h in enumerate(mine + theirs)]
    local, foreign = router.split(urls)
    assert {u.host for u in local} == set(mine)
    assert {u.host for u in foreign} == set(theirs)
    assert router.enqueue(foreign, now=0.0) == []
    [full] = router.due(0.0)  # a full batch leaves at once
    assert full.owner == "b" and len(full.urls) == 3
    assert router.due(0.05) == []  # the rest lingers
    [rest] = router.due(0.1)
    assert len(rest.urls) == 1
    assert router.backlog() == 4


def test_unacknowledged_batches_are_sent_again_and_acks_end_them() -> None:
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=1, retry_after=2.0)
    router.enqueue([_url(1, _hosts_of(ring, "b", 1)[0])], 0.0)
    [batch] = router.due(0.0)
    assert router.due(1.0) == []
    assert router.due(2.0) == [batch]  # the same batch, same id: the owner dedups
    assert router.acked(batch.id) == batch
    assert router.acked(batch.id) is None
    assert router.due(10.0) == [] and router.backlog() == 0
    assert router.next_deadline() is None


def test_a_batch_unacknowledged_goes_again_less_and_less_often() -> None:
    """An owner that does not answer (its disk full, a cut link) is sent each batch
    again after 2, 4, 8, ... s, then once a minute, not every 2 s for ever."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=1, retry_after=2.0)
    router.enqueue([_url(1, _hosts_of(ring, "b", 1)[0])], 0.0)
    [batch] = router.due(0.0)
    sent = []
    now = 0.0
    while now < 600.0:
        deadline = router.next_deadline()
        assert deadline is not None
        now = deadline
        assert router.due(now) == [batch]
        sent.append(now)
    assert sent[:6] == [2.0, 6.0, 14.0, 30.0, 62.0, 122.0]
    assert all(b - a == 60.0 for a, b in itertools.pairwise(sent[5:]))
    assert router.acked(batch.id) == batch and router.next_deadline() is None


def test_an_owner_that_answers_again_is_sent_what_waits_for_it_at_once() -> None:
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=1, retry_after=2.0)
    first, second = _hosts_of(ring, "b", 2)
    router.enqueue([_url(1, first), _url(2, second)], 0.0)
    one, two = router.due(0.0)
    probes = [b for now in (2.0, 6.0, 14.0, 30.0) for b in router.due(now)]
    assert probes == [one, two, one, two]  # b does not answer: in turn, next in 32 s
    # While b is silent, what is found for it waits in the outbox on disk alone.
    assert router.enqueue([_url(3, first)], 40.0) == [] and router.due(40.0) == []
    assert router.backlog() == 3 and router.reloads() == []
    assert router.acked(two.id) == two  # b is back
    assert router.due(40.0) == [one]  # at once, not at the end of its back-off
    assert router.reloads() == ["b"]
    # The outbox's rows of b's hosts: 1 is still held here, and goes once, not twice.
    rows = iter([_url(1, first), _url(3, first)])
    assert router.reload("b", rows, 40.0, router.held_fps()) == [_url(3, first)]
    [three] = router.due(40.0)
    assert [u.fp for u in three.urls] == [3]
    assert router.reloads() == [] and router.backlog() == 2


def test_a_restarted_peers_batches_are_not_numbered_as_before() -> None:
    """An owner holds its acknowledgements up to a linger: a peer restarted meanwhile
    must not take an answer to its previous run's batch 1 for its new batch 1 (its
    outbox rows would be dropped unsent)."""
    ring = Ring(["a", "b"])
    host = _hosts_of(ring, "b", 1)[0]
    firsts = set()
    for _ in range(20):  # twenty runs of peer a
        router = Router("a", ring, batch_size=1)
        router.enqueue([_url(1, host)], 0.0)
        [batch] = router.due(0.0)
        firsts.add(batch.id)
        assert 0 < batch.id < 2**62
    assert len(firsts) == 20


@pytest.mark.parametrize("since", [0.7, 1.1, 3.3, 1e6 + 0.7])
def test_what_next_deadline_promises_is_due_at_that_deadline(since: float) -> None:
    """At ``since + linger`` a batch is due, whatever the rounding: the peer's router
    loop sleeps until next_deadline() and then asks due(); nothing due there would make
    it spin without sleeping (0.7 + 0.1 - 0.7 < 0.1 in floating point)."""
    ring = Ring(["a", "b"])
    router = Router("a", ring, batch_size=50, linger=0.1, retry_after=0.3)
    router.enqueue([_url(1, _hosts_of(ring, "b", 1)[0])], since)
    deadline = router.next_deadline()
    assert deadline is not None
    [batch] = router.due(deadline)
    deadline = router.next_deadline()
    assert deadline is not None
    assert router.due(deadline) == [batch]  # the resend, likewise


def test_repeated_links_are_not_forwarded_twice() -> None:
    ring = Ring(["a", "b"])
    router = Router("a", ring)
    u = _url(7, _hosts_of(ring, "b", 1)[0])
    _, first = router.split([u])
    router.enqueue(first, 0.0)
    _, again = router.split([u])
    assert again == [] and router.stats.recent_skips == 1


def test_a_link_forwarded_to_an_owner_that_died_goes_to_the_new_owner() -> None:
    """The recent-URL cache skipped a URL by its fingerprint alone: forwarded once to
    b, acknowledged, and b dead for good, it was dropped whenever found again, and its
    new owner c never had it (found by a review)."""
    three, two = Ring(["a", "b", "c"]), Ring(["a", "c"])
    host = next(h for h in _hosts_of(three, "b", 200) if two.owner(h) == "c")
    u = _url(7, host)
    router = Router("a", three, batch_size=1)
    _, foreign = router.split([u])
    router.enqueue(foreign, 0.0)
    [batch] = router.due(0.0)
    assert router.acked(batch.id) == batch  # b admitted it; then b dies
    assert router.ring_changed(two, 1.0) == ([], [])
    _, again = router.split([u])
    assert again == [u] and router.stats.recent_skips == 0
    router.enqueue(again, 1.0)
    [batch] = router.due(1.0)
    assert batch.owner == "c" and batch.urls == (u,)
    # Found once more, it is c's repeat now: skipped.
    assert router.split([u]) == ([], []) and router.stats.recent_skips == 1


def test_a_ring_change_reroutes_waiting_urls_and_returns_those_now_local() -> None:
    ring = Ring(["a", "b", "c"])
    router = Router("a", ring, batch_size=100, linger=0.1)
    b_hosts = _hosts_of(ring, "b", 30)
    router.enqueue([_url(i, h) for i, h in enumerate(b_hosts[:10])], 0.0)
    [sent] = router.due(0.1)
    router.enqueue([_url(100 + i, h) for i, h in enumerate(b_hosts[10:])], 0.2)
    # b leaves: its URLs go to a (returned as local) or c (queued for c).
    smaller = Ring(["a", "c"])
    local, dropped = router.ring_changed(smaller, 0.3)
    assert dropped == [sent.id]
    assert {u.host for u in local} == {h for h in b_hosts if smaller.owner(h) == "a"}
    batches = router.due(1.0)
    assert {b.owner for b in batches} == {"c"}
    assert sum(len(b.urls) for b in batches) + len(local) == 30
    assert router.acked(sent.id) is None


def test_url_lists_from_peers_are_normalised_again() -> None:
    """The wire checks their shape (tests/wire/test_payloads.py); the peer, what they
    mean: URLs that do not normalise are dropped, and a host's list holds only it."""
    from ubipy.errors import WireError
    from ubipy.peer.router import url_items

    urls = url_items(
        [("HTTP://A.test:80/x#f", 2, 0.5), ("mailto:x@y", 1, 0.0), ("not a url", 0, 0.0)]
    )
    assert [(u.url, u.host, u.depth, u.score) for u in urls] == [
        ("http://a.test/x", "a.test", 2, 0.5)
    ]
    with pytest.raises(WireError, match=r"b\.test among a\.test"):
        url_items([("http://b.test/", 0, 0.0)], host="a.test")


def test_with_a_cap_the_linger_grows_with_the_members_it_spreads_over() -> None:
    """One outbox per other member fills that many times slower: the linger is per
    other member, up to the cap, and the resend waits at least two lingers (an owner
    may hold its acknowledgement for one)."""
    two = Ring(["a", "b"])
    router = Router("a", two, linger=0.5, linger_cap=2.0, retry_after=2.0)
    assert router.linger == 0.5
    router.ring_changed(Ring(["a", "b", "c", "d"]), 0.0)
    assert router.linger == 1.5
    router.ring_changed(Ring([f"p{i}" for i in range(8)] + ["a"]), 0.0)
    assert router.linger == 2.0
    ring = Ring(["a", "b", "c", "d"])
    router.ring_changed(ring, 0.0)
    router.enqueue([_url(1, _hosts_of(ring, "b", 1)[0])], 0.0)
    assert router.due(1.4) == []
    [batch] = router.due(1.5)
    assert router.due(1.5 + 2.9) == []
    assert router.due(1.5 + 3.0) == [batch]  # resent after two lingers, not 2 s


async def test_an_acknowledgement_wakes_the_sender_for_what_waited_for_its_owner(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Crawled:
        def forwarded(self, fps: object) -> None:
            pass

    ring = Ring(["a", "b"])
    host = _hosts_of(ring, "b", 1)[0]
    router = Router("a", ring, batch_size=1, retry_after=2.0)
    sent: list[tuple[float, int]] = []

    async def send(address: str, message: Message) -> bool:
        assert isinstance(message, UrlBatch)
        sent.append((trio.current_time(), message.id))
        return True

    forwarder = Forwarder(router, Crawled(), send, lambda peer: peer, trio.lowlevel.checkpoint)  # type: ignore[arg-type]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(forwarder.run)
        router.enqueue([_url(1, host), _url(2, host)], 0.0)
        forwarder.kick()
        # b silent: both sent at 0, the first (the probe) again at 2, 6, 14, 30, next
        # at 62; the second waits behind it.
        await trio.sleep(35.0)
        first, second = (batch_id for _, batch_id in sent[:2])
        await forwarder.on_url_ack("b", UrlAck((first,)), None)  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        assert sent[-1] == (35.0, second)  # at once, not at 62
        nursery.cancel_scope.cancel()
