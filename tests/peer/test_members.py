"""What a peer keeps of its members: who is at each address, for the frames sent
there, and every peer known, across a restart."""

from __future__ import annotations

from pathlib import Path

from ubipy.membership import Member, MemberState
from ubipy.peer.members import MemberBook
from ubipy.store import Shard


def test_frames_name_the_live_member_at_an_address_and_any_peer_elsewhere(
    tmp_path: Path,
) -> None:
    shard = Shard.open(tmp_path)
    try:
        book = MemberBook(shard)
        assert book.recipient("10.0.0.2:7000") == ""  # joining through it: anyone there
        book.changed(
            [
                Member("old", "10.0.0.2:7000", MemberState.DEAD, 3),
                Member("new", "10.0.0.2:7000", MemberState.ALIVE, 0),
                Member("gone", "10.0.0.3:7000", MemberState.LEFT, 1),
                Member("slow", "10.0.0.4:7000", MemberState.SUSPECT, 2),
            ]
        )
        # A peer restarted afresh on a dead one's address is the one frames are for...
        assert book.recipient("10.0.0.2:7000") == "new"
        # ...and one dead or gone is still named (a dead one is dialled to reconnect).
        assert book.recipient("10.0.0.3:7000") == "gone"
        assert book.recipient("10.0.0.4:7000") == "slow"
        assert book.recipient("10.0.0.9:7000") == ""
        # A new peer on an address whose old one is not seen dead yet, or two gone from
        # one address: which is there is not sure, so any peer there takes the frame.
        book.changed(
            [
                Member("old", "10.0.0.2:7000", MemberState.ALIVE, 3),
                Member("new", "10.0.0.2:7000", MemberState.ALIVE, 0),
                Member("gone", "10.0.0.3:7000", MemberState.LEFT, 1),
                Member("dead", "10.0.0.3:7000", MemberState.DEAD, 1),
            ]
        )
        assert book.recipient("10.0.0.2:7000") == ""
        assert book.recipient("10.0.0.3:7000") == ""
    finally:
        shard.close()


def test_the_peers_known_are_there_at_the_next_start(tmp_path: Path) -> None:
    members = [
        Member("b", "10.0.0.2:7000", MemberState.ALIVE, 0),
        Member("a", "10.0.0.1:7000", MemberState.DEAD, 0),
    ]
    shard = Shard.open(tmp_path)
    try:
        assert MemberBook(shard).last_members == ()
        MemberBook(shard).remember(members)
    finally:
        shard.close()
    shard = Shard.open(tmp_path)
    try:
        assert MemberBook(shard).last_members == ("a", "b")
    finally:
        shard.close()


def test_the_peers_that_left_for_good_are_there_at_the_next_start(tmp_path: Path) -> None:
    """What the hand-off says of leaves swept is kept (not waited for at the next
    start); a value this version did not write is no leave at all (hosts then wait)."""
    shard = Shard.open(tmp_path)
    try:
        assert MemberBook(shard).leaves == {}
        MemberBook(shard).remember_leaves({"c": "a,b"})
    finally:
        shard.close()
    shard = Shard.open(tmp_path)
    try:
        assert MemberBook(shard).leaves == {"c": "a,b"}
        for junk in ("[1, 2]", "{not json", '{"c": 3}'):
            with shard.transaction():
                shard.set_meta("leaves_swept", junk)
            assert MemberBook(shard).leaves == {}
    finally:
        shard.close()


def test_a_leave_that_handed_hosts_on_is_there_at_the_next_start(tmp_path: Path) -> None:
    shard = Shard.open(tmp_path)
    try:
        assert not MemberBook(shard).handed_on
        MemberBook(shard).remember_handed(True)
    finally:
        shard.close()
    shard = Shard.open(tmp_path)
    try:
        book = MemberBook(shard)
        assert book.handed_on
        book.remember_handed(False)
        assert not MemberBook(shard).handed_on
    finally:
        shard.close()
