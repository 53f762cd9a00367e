"""The peer's side of the majority lease (:mod:`ubipy.membership.quorum`): a member
counts as in sight when it answered one of our pings (a probe, or a ping of the
lease's own) sent within the lease: a round trip, since a frame that merely came
from a member does not show that ours reach it (under one-way loss a peer would
go on hearing the others while they declare it dead); membership's changes move the
base; a loop pauses the crawler when the lease lapses (abandoning what is in
flight), resumes it when a majority is back in sight (each host it owns waiting
until the others have swept), and asks members not heard from lately for a sign of
life, so that a quiet but healthy cluster keeps its lease. A peer new to the cluster
asks the members it sees for their base (BASE_ASK) until one that holds the lease
names it (:mod:`ubipy.wire.majority`), and answers others' asks; so does a peer back
with the base its last run kept, until a majority of that base still counts it.

The base is kept in the shard for the next run, but for a peer that left (SIGTERM):
the others drop a leaving peer from their base at once, so what it kept would only
be a base they no longer have. It keeps none, and comes back as new peers come (with
``--join``, waiting to be counted; without, founding a base of itself, as the first
peer does), unless its base was itself alone (the last peer of a cluster, or a lone
one), which it keeps."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Iterable, Sequence

import trio

from ubipy.errors import StorageError
from ubipy.membership import (
    LIVE_STATES,
    ChangeKind,
    MemberEvent,
    Membership,
    MemberState,
    Outgoing,
    Ping,
    Quorum,
)
from ubipy.net import Handle, Reply, Send
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.peer.wakeup import Wakeup
from ubipy.store import Shard
from ubipy.wire import BaseAnswer, BaseAsk

log = logging.getLogger(__name__)

_BASE_META = "majority_base"
# The base a peer that left had when it was asked to stop: back, it may not found a base
# until each other member of it is in sight and says it left too (Quorum.informed).
_LEFT_BASE_META = "left_base"


def load_quorum(peer_id: str, shard: Shard, *, lease: float, newcomer: bool) -> Quorum:
    """The majority lease as the last run left it: its base and joint base, kept in
    the shard as "BASE|JOINT", to restore (none for a new peer or one that left, which
    is pending if it joins others: a ``newcomer``)."""
    kept = shard.get_meta(_BASE_META)
    base, _, joint = (kept or "").partition("|")
    left_base = (shard.get_meta(_LEFT_BASE_META) or "") if kept == "" else ""
    return Quorum(
        peer_id,
        base.split(",") if base else [],
        lease=lease,
        newcomer=newcomer,
        joint=joint.split(",") if joint else [],
        restored=bool(base),
        returned=kept == "",  # written empty by a leave; never written by a new peer
        left_base=left_base.split(",") if left_base else (),
    )


_COUNTED = "a member that holds the majority lease counts this peer in its base"


class Lease:
    def __init__(
        self,
        quorum: Quorum,
        membership: Membership,
        crawler: Crawler,
        handoff: Handoff,
        shard: Shard,
        send: Callable[[list[Outgoing]], None],
    ) -> None:
        self.quorum = quorum
        self._membership = membership
        self._crawler = crawler
        self._handoff = handoff
        self._shard = shard
        self._send = send
        self._kick = Wakeup()
        # When each member was last pinged (by us or membership's probe): at most one
        # ping a cadence each, however often the loop wakes; and the first ping since
        # its last answer (the one repeated early, see _due_at).
        self._pinged: dict[str, float] = {}
        self._first_unanswered: dict[str, float] = {}
        # While new to the cluster: when each member was last asked for its base.
        self._asked: dict[str, float] = {}
        self._start_soon: Callable[..., object] = lambda *args: None
        self._send_frame: Send | None = None
        self._new = quorum.pending
        # Every member of every base (and joint base) this peer has had since it last
        # resumed: any of them may have been given its hosts while it was cut off, even
        # one that the base it resumes under leaves out (a holder's base shrunk by a
        # death that was not one: a stale DEAD rumour, sent by this very peer during
        # the cut and delivered at the heal).
        self._counted: set[str] = set()
        self._note_base()
        # What the shard keeps once this peer has left (see the module's docstring),
        # decided when it is asked to stop (see stopping).
        self._parting: str | None = None
        # The base (and joint base) it had when asked to stop, as kept once it left.
        self.left_with: frozenset[str] = frozenset()
        self._left_base = ""
        # When each member last answered an ask (heard_after waits for one).
        self._answered_at: dict[str, float] = {}
        self._answer_came = trio.Event()
        self._cadence = quorum.lease / 3
        # Membership's tick pings the members due then or up to this much later: one
        # wake-up serves both, where times drift apart by how late each runs.
        self._slack = min(self._cadence, membership.config.probe_interval) / 4

    def install(self, handle: Handle, send: Send, start_soon: Callable[..., object]) -> None:
        """Take the base frames from ``handle``; asks go out through ``send`` in the
        background (``start_soon``)."""
        self._send_frame, self._start_soon = send, start_soon
        handle(BaseAsk, self._on_ask)
        handle(BaseAnswer, self._on_answer)

    async def _on_ask(self, sender: str, ask: BaseAsk, reply: Reply) -> None:
        quorum, now = self.quorum, trio.current_time()
        if quorum.pending and quorum.expecting:
            return  # unanswered, it keeps the asker from founding (Quorum.expecting)
        if self._admit(now, tell=False):  # told by this reply
            self._remember()
        await reply(self._answer(now))

    def _answer(self, now: float) -> BaseAnswer:
        """This peer's base, as an ask is answered."""
        quorum = self.quorum
        base = () if quorum.pending else tuple(sorted(quorum.base))
        joint = tuple(sorted(quorum.joint or ()))
        return BaseAnswer(base, quorum.holds(now), quorum.informed, joint, quorum.returned)

    def _tell(self, members: Iterable[str], now: float) -> None:
        """Answer ``members`` unasked: each learns its place in the base at once, not
        at its next ask, a cadence on (a review: a newcomer whose holder left between
        the two stayed new for good, and the cluster with it)."""
        send = self._send_frame
        if send is None:
            return
        answer = self._answer(now)
        for member_id in sorted(members):
            member = self._membership.member(member_id)
            if member is not None and member_id != self.quorum.self_id:
                self._start_soon(send, member.address, answer)

    async def heard_after(self, member_id: str, address: str, patience: float) -> bool:
        """Ask ``member_id`` for its base, and wait ``patience`` at most for its answer:
        True if one came, after what was sent to it before the ask (a frame written on
        a connection a silent cut swallows was counted as told: a review)."""
        send, asked = self._send_frame, trio.current_time()
        if send is None or not await send(address, BaseAsk()):
            return False
        with trio.move_on_after(patience):
            while self._answered_at.get(member_id, -math.inf) < asked:
                await self._answer_came.wait()
        return self._answered_at.get(member_id, -math.inf) >= asked

    async def parting(self, patience: float) -> None:
        """Before its leave is announced, a holder tells its base to the members of
        it: one new to the cluster that it counted, and has not yet heard so, takes
        the base from that (the leave then drops this peer from it), where it would
        wait for an answer from a peer gone. Waits ``patience`` at most."""
        send, quorum, now = self._send_frame, self.quorum, trio.current_time()
        if send is None or quorum.pending or not quorum.holds(now):
            return
        answer = self._answer(now)
        with trio.move_on_after(patience):
            async with trio.open_nursery() as telling:
                for member_id in sorted(quorum.base - {quorum.self_id}):
                    member = self._membership.member(member_id)
                    if member is not None and member.state in LIVE_STATES:
                        telling.start_soon(send, member.address, answer)

    async def _on_answer(self, sender: str, answer: BaseAnswer, reply: Reply) -> None:
        quorum = self.quorum
        self._note_base()  # the base this answer may replace
        now = trio.current_time()
        self._answered_at[sender] = now
        self._answer_came.set()
        self._answer_came = trio.Event()
        if answer.left and not quorum.holds(now) and quorum.gone(sender, now, left=True):
            # Its leave never came (it left during a cut): a base that names it waited
            # for good, a restored one for its count (a review's triage). Not a
            # holder's: the answer may be older than a base that counts it again.
            log.info("%s left in its last run, unheard: out of the majority's base", sender)
            self._remember()
        if quorum.answered(
            sender,
            answer.members,
            now,
            holds=answer.holds,
            informed=answer.informed,
            joint=answer.joint,
            left=answer.left,
        ):
            log.info("counted in the majority's base by %s: %d peers", sender, len(quorum.base))
            # A member of it that left before this answer came (the holder that sent
            # it on leaving, say) leaves it now, as it would have had we held then.
            for member in self._membership.members():
                if member.state is MemberState.LEFT:
                    quorum.gone(member.id, now, left=True)
            self._remember()
        self._kick.set()

    def _admit(self, now: float, *, tell: bool = True) -> bool:
        """The live members that have answered join the base (while it holds); said,
        as the base's other changes are by membership's own lines, and told to those
        added (``tell``)."""
        before = self.quorum.base
        if not self.quorum.admit_live(now):
            return False
        added = self.quorum.base - before
        names = ", ".join(sorted(added))
        log.info("%s counted in the majority's base (%d peers)", names, len(self.quorum.base))
        if tell:
            self._tell(added, now)
        return True

    def _note_base(self) -> None:
        self._counted |= self.quorum.base | (self.quorum.joint or frozenset())

    @property
    def expecting(self) -> bool:
        """New, and waiting for one of its join addresses to answer."""
        return self.quorum.pending and self.quorum.expecting

    def join_answered(self, address: str, member_id: str) -> None:
        """A join address answered (``member_id``): the peer may found a cluster with
        those it meets, that one among them (Quorum.answered_at_join)."""
        if self.expecting:
            log.info("--join %s answered", address)
            self.quorum.answered_at_join(member_id)
            self._kick.set()

    def nobody_to_join(self) -> None:
        """A try to join reached nobody but this peer itself: a new peer founds a base
        of itself (one that has a base keeps it)."""
        if self.quorum.alone():
            log.info("every --join address reached this peer itself: a cluster of its own")
            self._remember()
            self._kick.set()

    def stopping(self) -> None:
        """The peer is asked to stop: what its shard keeps once it has left is decided
        from the base it has now, before its crawler drains and before any other
        peer's leave. When a whole cluster stops at once, the others' leaves reach a
        peer while it drains and shrink its base to itself alone; decided at its own
        leave, the last peer kept that, as a lone peer does, and started again held a
        lease alone beside the base that the peer without --join founded (a review)."""
        if self._parting is None:
            alone = self.quorum.base == {self.quorum.self_id}
            self._parting = self._kept() if alone else ""
            self.left_with = self.quorum.base | (self.quorum.joint or frozenset())
            self._left_base = ",".join(sorted(self.left_with))

    def _kept(self) -> str:
        base, joint = self.quorum.base, self.quorum.joint
        return ",".join(sorted(base)) + ("|" + ",".join(sorted(joint)) if joint else "")

    def _remember(self) -> None:
        kept = self._kept()
        if self._parting and self.quorum.base != {self.quorum.self_id}:
            self._parting = ""  # another admitted since the stop was asked: not alone
        if self._membership.has_left:
            self.stopping()  # a no-op: a stop, which asked it, comes before every leave
            kept = self._parting or ""
        try:
            with self._shard.transaction():
                self._shard.set_meta(_BASE_META, kept)
                if self._membership.has_left and not kept:
                    self._shard.set_meta(_LEFT_BASE_META, self._left_base)
        except StorageError as exc:
            log.warning("cannot remember the members of the majority: %s", exc)

    def left(self) -> None:
        """This peer has announced its leave: its shard keeps, from now on, what a peer
        that left keeps. Written here, not on the leave's own event: a peer stopped on
        its own usually exits before membership hands that event to
        :meth:`membership_changed`, and its shard kept the base it had, to come back
        restoring it (a review)."""
        self._remember()

    def answered(self, answers: Sequence[tuple[str, float]]) -> None:
        """Members answered our pings sent at these times."""
        quorum = self.quorum
        joint = quorum.joint
        for member_id, sent in answers:
            quorum.heard(member_id, sent)
        if joint is not None and quorum.joint is None:
            # Kept without it: a restart would be bound by a joint base confirmed long
            # before, awaiting the word of a member that may never come back.
            log.info("the base of %d peers confirmed by the one before it", len(quorum.base))
            self._remember()
        if answers and self._admit(trio.current_time()):
            self._remember()  # a newcomer's first answer: it joins the base
        if answers and self._crawler.paused is not None:
            self._kick.set()
        elif answers:
            self._kick.reschedule(self._next_wake(trio.current_time()))

    def membership_changed(self, events: Sequence[MemberEvent]) -> None:
        """The members that count, and the base (changed only while the lease holds)."""
        quorum, now = self.quorum, trio.current_time()
        self._note_base()  # before a death shrinks it
        quorum.set_live(self._membership.alive_ids())
        changed = False
        for event in events:
            if event.kind in (ChangeKind.DEAD, ChangeKind.LEFT):
                left = event.kind is ChangeKind.LEFT
                changed |= quorum.gone(event.member.id, now, left=left)
        # Those that joined, or came back, are live and missing from the base.
        changed |= self._admit(now)
        if changed:
            self._remember()
        self._kick.set()

    def check(self) -> None:
        """Pause or resume the crawler as the lease says now (also before it starts:
        a peer back from a stop may not fetch before it sees a majority)."""
        quorum, now = self.quorum, trio.current_time()
        if quorum.found():
            log.info("only new peers in sight: founding the majority's base with them")
            self._remember()
        elif quorum.restore(now):
            log.info("a majority of the base kept by the last run still counts this peer")
        elif self._admit(now):
            self._remember()
        crawler, sight = self._crawler, quorum.sight(now)
        if sight.holds and crawler.paused is None:
            self._counted = set()  # fetching: only the base it has now counts
        self._note_base()
        if sight.pending:
            if crawler.paused is None:
                log.info("new to the cluster: fetching waits until %s", _COUNTED)
            crawler.pause(f"new to the cluster: {sight}")
        elif sight.restoring:
            if crawler.paused is None:
                log.info(
                    "back with the base of its last run: fetching waits until %s, or a "
                    "majority of that base still counts this peer",
                    _COUNTED,
                )
            crawler.pause(f"restarted: {sight}")
        elif sight.holds and crawler.paused is not None:
            if self._new:
                log.info("a majority's base (%s): fetching starts", sight)
            else:
                log.warning("a majority in sight again (%s): fetching resumes", sight)
            self._new = False
            # Everyone in the base, not only those in sight yet: any of them may have
            # been given this peer's hosts, and the rest of a healed side often comes
            # back a moment after the first of it. And everyone in the bases it had
            # while paused (but those that left): the one it resumes under may lack a
            # member that held its hosts through the cut (see _counted).
            left = {m.id for m in self._membership.members() if m.state is MemberState.LEFT}
            self._handoff.resumed(frozenset(self._counted | self._membership.alive_ids()) - left)
            crawler.pause(None)
        elif not sight.holds:
            if crawler.paused is None:
                log.warning("lost sight of a majority (%s): fetching paused", sight)
            crawler.pause(f"no majority in sight: {sight}")

    def tick(self, now: float, sent: Sequence[Outgoing] = ()) -> None:
        """Ask the members due for a sign of life: those neither heard from nor asked
        for a cadence. Called on membership's tick (``sent``: what it sent then, whose
        probe counts as asking), so an idle peer's lease takes no wake-up of its own
        (each costs CPU), and by the lease's own loop."""
        heard = self.quorum.last_heard()
        for out in sent:
            if isinstance(out.message, Ping):
                self._note_ping(out.message.target_id, now, heard)
        due = [m for m, at in self._due_at(now, heard).items() if now + self._slack >= at]
        for member_id in due:
            self._note_ping(member_id, now, heard)
        pings = [self._membership.ping(now, m) for m in due]
        self._send([out for out in pings if out is not None])
        if self._asking(now):
            self._ask(now)
        self._kick.reschedule(self._next_wake(now))  # a no-op from the loop itself

    def _asking(self, now: float) -> bool:
        """New, restoring, or not holding on the base it has: the members' bases may
        let it."""
        return self.quorum.pending or not self.quorum.holds(now)

    def _ask(self, now: float) -> None:
        """Ask each member in sight for its base, once a cadence each."""
        send = self._send_frame
        for member_id, at in self._ask_due_at().items():
            member = self._membership.member(member_id)
            if send is None or member is None or now < at:
                continue
            self._asked[member_id] = now
            self._start_soon(send, member.address, BaseAsk())

    def _ask_due_at(self) -> dict[str, float]:
        return {
            m: self._asked.get(m, -math.inf) + self._cadence
            for m in sorted(self._membership.alive_ids() - {self.quorum.self_id})
        }

    def _note_ping(self, member_id: str, now: float, heard: dict[str, float]) -> None:
        if self._pinged.get(member_id, -math.inf) <= heard.get(member_id, -math.inf):
            self._first_unanswered[member_id] = now  # every earlier ask was answered
        self._pinged[member_id] = now

    def _due_at(self, now: float, heard: dict[str, float]) -> dict[str, float]:
        """When each member the lease keeps in sight (:meth:`Quorum.to_keep`) is next
        to be asked: a cadence after it was last heard from or asked, but half a cadence
        after the first ask it has not answered (an answer comes back in well under
        that; once only, so a member that cannot answer is asked no more often than
        before), and one silent so long has another kept beside it. Asking fewer
        members, the lease has fewer answers to spare: under 10% loss each way, eight
        peers asking five each lost it 9 times in 86,400 peer-seconds with a cadence for
        every ask, as against once asking all seven. ``heard``: the quorum's
        :meth:`~Quorum.last_heard`, read once a wake."""
        pinged, cadence = self._pinged, self._cadence
        unanswered = {m: at for m, at in pinged.items() if at > heard.get(m, -math.inf)}
        silent = [m for m, at in unanswered.items() if now - at >= cadence / 2]
        first, quorum = self._first_unanswered, self.quorum
        kept = quorum.to_keep(now, silent, heard)
        if quorum.holds(now):  # those not in the base join it once they answer
            kept.update((m, -math.inf) for m in quorum.outside())
        return {
            m: unanswered[m] + cadence / 2
            if first.get(m) == unanswered.get(m, math.nan)
            else max(at, pinged.get(m, -math.inf)) + cadence
            for m, at in kept.items()
        }

    def _next_wake(self, now: float) -> float:
        """When the loop must look again: the lease lapsing, or a member due that
        membership's tick did not ask (it ticks less often than members come due, has
        stopped, or came late: then half a cadence on). Kept up to date as answers come
        and ticks ask, so that the loop sleeps through a healthy cluster's life."""
        expires = self.quorum.expires(now)
        wake = math.inf if expires is None else expires
        if self._asking(now):
            wake = min([wake, *self._ask_due_at().values()])
        heard = self.quorum.last_heard()
        due_at = self._due_at(now, heard)
        due = min(due_at.values(), default=math.inf)
        membership = self._membership
        if membership.has_left or membership.config.probe_interval > self._cadence:
            return min(wake, due)
        # The first unanswered ask is repeated on time, off the tick (only under loss).
        again = (
            at
            for m, at in due_at.items()
            if (pinged := self._pinged.get(m, -math.inf)) > heard.get(m, -math.inf)
            and at < pinged + self._cadence
        )
        return min(wake, due + self._cadence / 2, min(again, default=math.inf))

    async def run(self) -> None:
        while True:
            self.check()
            now = trio.current_time()
            self.tick(now)
            # Never "now": a loop that pings on every turn must not spin at one instant.
            await self._kick.wait(max(self._next_wake(now), now + self._cadence / 100))
