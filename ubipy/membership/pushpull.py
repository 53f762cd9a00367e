"""A push-pull's member table: what a peer sends of its own, and how one it receives is
read, as a batch of rumours (memberlist's ``mergeState``)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping

from ubipy.membership.messages import LIVE_STATES, MAX_PUSH_PULL_MEMBERS, Member, PushPull, Update
from ubipy.membership.transitions import ALIVE, DEAD, LEFT, SUSPECT

__all__ = ["merged", "table"]


def table(members: Mapping[str, Member], *, is_reply: bool) -> PushPull:
    """This peer's table, tombstones dropped first past the wire's bound."""
    rows = list(members.values())
    if len(rows) > MAX_PUSH_PULL_MEMBERS:
        # Far beyond the sizes we run at.
        rows.sort(key=lambda m: m.state not in LIVE_STATES)
        rows = rows[:MAX_PUSH_PULL_MEMBERS]
    return PushPull(tuple(rows), is_reply)


def merged(
    received: tuple[Member, ...], known: Mapping[str, Member], self_id: str
) -> Iterator[Update]:
    """A received table as rumours, to apply one by one as they are made."""
    for m in received:
        mine = known.get(m.id)
        state = m.state
        if state is SUSPECT and mine is None:
            # Learn it as ALIVE: it still holds a place on everyone's ring, and our
            # own probes will judge it.
            state = ALIVE
        elif state is DEAD and mine is not None and mine.state in LIVE_STATES:
            # As memberlist: a death learnt in bulk is only a suspicion, which the
            # member can still refute.
            state = SUSPECT
        source = m.id if state is ALIVE or state is LEFT else self_id
        yield Update(m.id, m.address, state, m.incarnation, source)
