"""Which members answered pings of ours themselves: proof that what we sent reached
them, which a frame that merely came from them is not (the majority lease counts
only these); and which a probe reached only by way of others, so that the driver
stops trusting its own link to them. No I/O, as in :mod:`ubipy.membership.machine`."""

from __future__ import annotations

from collections.abc import Callable


class Answers:
    """The pings sent outside the probe cycle, and since the driver last asked: the
    answers heard (a probe's and those pings') and the members reached only
    indirectly."""

    def __init__(self) -> None:
        # Pings of ours outside the probe cycle, by seq: (member, when sent).
        self._pings: dict[int, tuple[str, float]] = {}
        # (member, when our ping was sent) for each ping it answered itself.
        self._answers: list[tuple[str, float]] = []
        # Addresses, each once (a driver that never asks holds one per member).
        self._unreached: dict[str, None] = {}

    def sent(self, seq: int, member_id: str, now: float) -> None:
        """A ping outside the probe cycle went to ``member_id`` under ``seq``."""
        self._pings[seq] = (member_id, now)

    def answered(self, member_id: str, sent: float) -> None:
        """``member_id`` itself answered the probe sent at ``sent``."""
        self._answers.append((member_id, sent))

    def acked(self, seq: int, sender_address: str, address_of: Callable[[str], str | None]) -> None:
        """An Ack under ``seq`` came from ``sender_address``: an answer if it is one of
        our pings and came from the member pinged (at the address we know it by)."""
        ours = self._pings.get(seq)
        if ours is not None and address_of(ours[0]) == sender_address:
            del self._pings[seq]
            self._answers.append(ours)

    def expire(self, now: float, patience: float) -> None:
        """Forget the pings unanswered for longer than ``patience``."""
        late = [seq for seq, (_, sent) in self._pings.items() if now - sent > patience]
        for seq in late:
            del self._pings[seq]

    def reached_indirectly(self, address: str) -> None:
        """A probe of the member at ``address`` ended answered through others alone."""
        self._unreached[address] = None

    def drain(self) -> list[tuple[str, float]]:
        answers, self._answers = self._answers, []
        return answers

    def drain_unreached(self) -> list[str]:
        unreached, self._unreached = self._unreached, {}
        return list(unreached)
