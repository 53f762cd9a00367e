"""Acknowledgements held back to ride on the next batch going the other way."""

from __future__ import annotations

import math

from ubipy.peer.acks import AckBook


def test_acks_owed_to_a_peer_ride_on_the_next_frame_there() -> None:
    book = AckBook()
    book.add("b", 1, now=10.0)
    book.add("b", 2, now=10.5)
    book.add("c", 7, now=10.2)
    assert len(book) == 3
    assert book.take("b") == [1, 2]
    assert book.take("b") == []  # taken once
    assert book.due(10.9, 1.0) == []
    assert book.next_deadline(1.0) == 11.2


def test_acks_that_waited_their_patience_leave_alone_together() -> None:
    book = AckBook()
    book.add("b", 1, now=10.0)
    book.add("b", 2, now=10.8)  # waits as long as the oldest owed to b
    book.add("c", 3, now=10.5)
    assert book.due(10.99, 1.0) == []
    assert book.due(11.0, 1.0) == [("b", [1, 2])]
    assert book.due(11.5, 1.0) == [("c", [3])]
    assert len(book) == 0 and book.next_deadline(1.0) == math.inf
