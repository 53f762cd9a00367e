"""The seeds' scope, kept in the shard and shared with every member: the roots (hosts
or domains) the crawl follows links into, and the hosts the seeds were on, whose
addresses may be ones a crawler is otherwise refused (the user named them). A seed
given to one peer is often on a host another peer owns, and every peer judges the
links of its own pages, so each must know them all.

A seed that redirects (a bare domain to ``www.``, ``http`` to ``https``, an old name to
a new one) widens the scope to where it leads, as the seed did (Heritrix's
``seedsRedirectNewSeeds``): under ``--scope host`` the crawl of ``http://a.example/``
used to end at its one redirect to ``https://www.a.example/``, out of scope. The target
gets the scope, not a seed's other rights (a private address stays refused).

A member gets everything when it joins, what is new when seeds come, and, when it
is heard from again after being suspected (a lossy link, a short cut), what came
while it was. A frame lost on its way would leave the member to drop, as out of
scope, every link into the new seeds' hosts on the hosts it owns, so the receiver
acknowledges each frame once its shard keeps it (SCOPE_ACK, naming the frame by its
digest), and the sender sends it again, after 1, 2, 4, 8 s and so on up to every
30 s, until it is acknowledged or the member is no longer live.

Both ends do so only with members whose membership frames say they take SCOPE_ACK.
A peer of an earlier version does not: it is sent no acknowledgement (it would count
them as bad frames, and cut the connection after a few in a row), and each frame goes
to it as before, once, or up to five times while it cannot be sent at all. A member
not heard from yet (a joiner learnt of through another's gossip) is taken for one
until it is heard from within 15 s; then the frame goes again until acknowledged.

A frame goes to a member, not to an address: each try goes to where the member is
now. A member restarted on a new address, or one of two peers under one id (the
other stopped, ubipy.peer.idclash), takes its new place without a death or a join;
a frame held to its old address was given up there once it was no longer a live
member's, and the scope it carried never came.

A seed on another member's host goes there in a URL batch too, which can come before
its frame: the batch brings the seed's root itself (:func:`widen_to_seeds`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import trio

from ubipy.config import BoundsConfig
from ubipy.config import Scope as ScopeKind
from ubipy.errors import StorageError
from ubipy.fetch import BadURL, ScopeFilter, cloud_metadata, resolve_link
from ubipy.membership import ChangeKind, MemberEvent, MemberState
from ubipy.net import Handle, Reply, Send
from ubipy.store import NewURL, Shard
from ubipy.wire import FrameType, Scope, ScopeAck, batches

log = logging.getLogger(__name__)

_ROOTS_META = "scope_roots"
_SEEDS_META = "seed_hosts"
# How long a SCOPE frame waits for its acknowledgement before it is sent again: the
# first wait, doubled at each send, up to the last.
_FIRST_WAIT = 1.0
_LAST_WAIT = 30.0
# How many waits a frame to a member not known to acknowledge lasts (1 + 2 + 4 + 8 s),
# sent again only while it could not be sent, or once the member is heard to.
_EARLIER_TRIES = 5
_ACK = int(FrameType.SCOPE_ACK)


def load_scope(shard: Shard, bounds: BoundsConfig) -> ScopeFilter:
    """The scope the shard kept. A shard kept before the seeds' hosts were takes the
    hosts of its depth-0 URLs, as seeds were told then (redirects from seeds among
    them), once; but not an address of a cloud's metadata service, which a seed's
    redirect there would have made a seed (found by a review)."""
    roots, seeds = shard.get_meta(_ROOTS_META), shard.get_meta(_SEEDS_META)
    if seeds is None:
        hosts = sorted(h for h in shard.depth_zero_hosts() if not cloud_metadata(h))
        with shard.transaction():
            shard.set_meta(_SEEDS_META, seeds := "\n".join(hosts))
    return ScopeFilter.of(bounds, _lines(roots), _lines(seeds))


def _lines(text: str | None) -> list[str]:
    return text.split("\n") if text else []


def keep_scope(shard: Shard, scope: ScopeFilter) -> None:
    """Keep the scope (inside the caller's transaction)."""
    shard.set_meta(_ROOTS_META, "\n".join(sorted(scope.roots)))
    shard.set_meta(_SEEDS_META, "\n".join(sorted(scope.seeds)))


def widen_to_redirect(crawler: Scoped, location: str, seed: str) -> bool:
    """A URL at depth 0 redirects to ``location``: its root joins the scope (kept in
    the shard). True if it was new."""
    scope = crawler.scope
    try:
        url, host, _ = resolve_link(location, seed)
    except BadURL:
        return False  # counted where the redirect's target is refused
    if scope.scope is ScopeKind.ANY or scope.allows_host(host):
        return False
    root = scope.root_of(host)
    try:
        if not crawler.add_scope_roots([root]):
            return False
    except StorageError as exc:
        # Taken in memory all the same, and shared: the target is admitted, the other
        # members keep the root, and this shard saves it with the scope's next change
        # (or is told it again by a member after a restart).
        log.warning("the scope takes %s (seed %s redirects there), not saved: %s", root, seed, exc)
        return True
    log.info("seed %s redirects to %s: the scope takes %s too", seed, url, root)
    return True


def widen_to_seeds(crawler: Scoped, urls: Iterable[NewURL]) -> bool:
    """URLs another peer forwarded: one at depth 0 that no redirect led to is a seed
    given there, its root on its way here in a SCOPE frame. The frame can come after
    the URL (lost and sent again after a back-off, or held to the old address of a
    member that moved): the seed was then fetched here and its links dropped as out
    of scope. So the batch brings the root too. Not the seed's host, whose address a
    seed may reach where a crawler is otherwise refused: an earlier version sends no
    redirects (nor does an outbox kept before schema 11), so a seed's redirect target
    looks like a seed here, and must not get its rights; they come with the frame. A
    redirect target counted as one is left to its frame too: whether it widens the
    scope is the redirecting peer's to say (ubipy.peer.reading.SCOPE_REDIRECTS).
    True if a root was new."""
    hosts = {url.host for url in urls if url.depth == 0 and not url.redirects}
    if not hosts:
        return False
    # StorageError goes up: the batch is then not acknowledged, and comes again.
    return crawler.add_scope_roots({crawler.scope.root_of(host) for host in hosts})


class Scoped(Protocol):
    """What the crawler keeps of the scope (``Crawler``)."""

    scope: ScopeFilter

    def scope_now(self) -> tuple[frozenset[str], frozenset[str]]:
        """The roots and the seeds' hosts."""

    def add_scope_roots(self, roots: Iterable[str], seeds: Iterable[str] = ()) -> bool:
        """Widen the scope with what another peer's seeds brought."""


@dataclass(slots=True)
class _Sending:
    """A frame on its way to a member: ``wake`` is set when it is acknowledged, or when
    it is to be sent again at once (the same frame, due again: a member refuted)."""

    wake: trio.Event = field(default_factory=trio.Event)
    acknowledged: bool = False
    again: bool = False


class ScopeSharing:
    def __init__(
        self,
        crawler: Scoped,
        send: Send,
        start_soon: Callable[..., object],
        live: Callable[[], Iterable[str]],
        address_of: Callable[[str], str | None],
    ) -> None:
        """``live()``: the ids of the other live members, suspected ones too;
        ``address_of(peer id)``: a member's address."""
        self._crawler = crawler
        self._send = send
        self._start_soon = start_soon
        self._live = live
        self._address_of = address_of
        # Frames on their way, by (member id, digest); the addresses of the members
        # that take SCOPE_ACK.
        self._sending: dict[tuple[str, int], _Sending] = {}
        self._acknowledging: set[str] = set()
        # Every root and seed host learnt while this peer runs, in order, and where
        # each suspected member's view of them stopped (by id).
        self._learnt: list[tuple[str, str]] = []
        self._known: set[tuple[str, str]] = set()
        self._suspected: dict[str, int] = {}

    def install(self, handle: Handle) -> None:
        handle(Scope, self._on_scope)
        handle(ScopeAck, self._on_scope_ack)

    def heard(self, address: str, takes: Iterable[int]) -> None:
        """A membership frame from the member at ``address`` said what it ``takes``."""
        if _ACK in takes:
            self._acknowledging.add(address)
        else:
            self._acknowledging.discard(address)

    def share(self, member_id: str) -> None:
        """Send a member the whole scope (it has just joined)."""
        roots, seeds = self._crawler.scope_now()
        self._send_scope(member_id, sorted(roots), sorted(seeds))

    def seeded(self, before: tuple[frozenset[str], frozenset[str]]) -> None:
        """Seeds came (the scope was ``before``): send what is new to every live member."""
        roots, seeds = self._crawler.scope_now()
        new_roots, new_seeds = sorted(roots - before[0]), sorted(seeds - before[1])
        self._learn(new_roots, new_seeds)
        for member_id in self._live():
            self._send_scope(member_id, new_roots, new_seeds)

    def seed_redirected(self, location: str, seed: str) -> None:
        """A URL at depth 0 (a seed, or where one led) redirects to ``location``: the
        scope takes its root (:func:`widen_to_redirect`), and the members are told."""
        before = self._crawler.scope_now()
        if widen_to_redirect(self._crawler, location, seed):
            self.seeded(before)

    def member_changed(self, event: MemberEvent) -> None:
        member_id = event.member.id
        if event.kind is ChangeKind.SUSPECT:
            self._suspected.setdefault(member_id, len(self._learnt))
        elif event.kind is ChangeKind.REFUTED and member_id in self._suspected:
            missed = self._learnt[self._suspected.pop(member_id) :]
            roots = [item for kind, item in missed if kind == "root"]
            self._send_scope(member_id, roots, [item for kind, item in missed if kind == "seed"])
        elif event.changes_ring:
            self._suspected.pop(member_id, None)
            if event.member.state in (MemberState.DEAD, MemberState.LEFT):
                # Whoever comes to its address next says whether it acknowledges.
                self._acknowledging.discard(event.member.address)

    async def _on_scope(self, sender: str, scope: Scope, reply: Reply) -> None:
        self._learn(scope.roots, scope.seeds)
        # A StorageError goes up to the peer: unacknowledged, the frame comes again.
        self._crawler.add_scope_roots(scope.roots, scope.seeds)
        if self._address_of(sender) in self._acknowledging:
            await reply(ScopeAck(scope.digest))

    async def _on_scope_ack(self, sender: str, ack: ScopeAck, reply: Reply) -> None:
        sending = self._sending.get((sender, ack.digest))
        if sending is not None:
            sending.acknowledged = True
            sending.wake.set()

    def _learn(self, roots: Iterable[str], seeds: Iterable[str]) -> None:
        for item in [*(("root", r) for r in roots), *(("seed", s) for s in seeds)]:
            if item not in self._known:
                self._known.add(item)
                self._learnt.append(item)

    def _send_scope(self, member_id: str, roots: list[str], seeds: list[str]) -> None:
        # In frames a receiver takes, however many there are.
        for run in batches(roots):
            self._start_soon(self._deliver, member_id, Scope(run))
        for run in batches(seeds):
            self._start_soon(self._deliver, member_id, Scope((), run))

    async def _deliver(self, member_id: str, scope: Scope) -> None:
        """Send until acknowledged, while the member is live, to where it is at each
        try: a frame written to a connection that then broke is lost without the
        member being suspected."""
        key = (member_id, scope.digest)
        if (sending := self._sending.get(key)) is not None:
            # On its way there already, perhaps near its last try: again, at once.
            sending.again = True
            sending.wake.set()
            return
        self._sending[key] = sending = _Sending()
        try:
            wait, tries = _FIRST_WAIT, 0
            sent_to: str | None = None  # where it was written, if it was
            while not sending.acknowledged and member_id in self._live():
                address = self._address_of(member_id)
                if address is None:
                    return
                sending.wake = trio.Event()
                # Until written to a member not known to acknowledge (of an earlier
                # version, or one not heard from yet: a joiner's first frames come
                # through others), until acknowledged once it is.
                if sent_to != address or address in self._acknowledging:
                    sent_to = address if await self._send(address, scope) else None
                tries += 1
                if tries >= _EARLIER_TRIES and address not in self._acknowledging:
                    return
                if not sending.acknowledged:
                    with trio.move_on_after(wait):
                        await sending.wake.wait()
                if sending.again:
                    sending.again, sent_to, wait, tries = False, None, _FIRST_WAIT, 0
                else:
                    wait = min(2 * wait, _LAST_WAIT)
        finally:
            del self._sending[key]
