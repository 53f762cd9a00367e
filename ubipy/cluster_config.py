"""The configuration's sections about the cluster rather than the crawl: how URLs travel
between peers, what survives a dead one, the membership protocol's timings and the
control centre. Re-exported by :mod:`ubipy.config`, the one place to import them from."""

from __future__ import annotations

from dataclasses import dataclass

from ubipy.errors import ConfigError
from ubipy.membership import MembershipConfig
from ubipy.options import option
from ubipy.validation import at_least, positive, show
from ubipy.wire import MAX_ITEMS


@dataclass(frozen=True, slots=True)
class ForwardingConfig:
    """How URLs found for hosts that other peers own are sent to them, in batches."""

    # A peer spreads its foreign links over one outbox per other member, so with a
    # fixed linger the batches thin out as the cluster grows (one or two URLs a
    # frame at a few dozen pages a second); a few seconds are nothing to a URL that
    # waits its turn in a frontier anyway.
    batch_size: int = option(
        50,
        flag="--batch-size",
        metavar="N",
        help="URLs for another peer leave as one frame when N are waiting (default: {default})",
    )
    batch_linger: float = option(
        0.5,
        flag="--batch-linger",
        metavar="SECONDS",
        help="...or when the oldest has waited this long per other peer in the cluster "
        "(default: {default})...",
    )
    batch_linger_max: float = option(
        5.0,
        flag="--batch-linger-max",
        metavar="SECONDS",
        help="...but never longer than this (default: {default})",
    )
    batch_retry: float = option(
        2.0, help="seconds before a batch its owner did not acknowledge is sent again"
    )
    # Each is also in the outbox on disk: memory holds what is on its way, and no more
    # than this for a member that stays in the ring but answers nothing (a full disk).
    held_max: int = option(
        50_000,
        help="URLs for one other peer held in memory on their way; the rest wait in the "
        "outbox on disk until it has taken half of them",
    )

    def __post_init__(self) -> None:
        at_least(self, 1, "batch_size")
        if self.batch_size > MAX_ITEMS:
            # A larger batch would be refused by its owner, and sent again for ever.
            raise ConfigError(
                f"must be at most {MAX_ITEMS} (the URLs a peer takes in one frame), "
                f"not {show(self.batch_size)}",
                "batch_size",
            )
        at_least(self, 0, "batch_linger", "batch_linger_max")
        at_least(self, 1, "held_max")
        positive(self, "batch_retry")


@dataclass(frozen=True, slots=True)
class ReplicationConfig:
    """What survives a dead peer: copies of its frontier, or a wait for its return."""

    # 1: no copies; 2: the owner and the next peer clockwise.
    replicas: int = option(
        1,
        flag="--replicas",
        choices=(1, 2),
        help="2 keeps a copy of each owner's frontier and history on the next peer "
        "clockwise, which takes the hosts over if the owner dies (default: {default})",
    )
    # Others would fetch again what the dead peer had.
    rejoin_grace: float = option(
        30.0,
        flag="--rejoin-grace",
        metavar="SECONDS",
        help="with --replicas 1, hold a dead peer's hosts this long before others crawl "
        "them, so a peer restarted meanwhile takes them back and fetches nothing twice "
        "(default: {default})",
    )

    def __post_init__(self) -> None:
        if self.replicas not in (1, 2):
            raise ConfigError(f"must be 1 or 2, not {show(self.replicas)}", "replicas")
        at_least(self, 0, "rejoin_grace")


@dataclass(frozen=True, slots=True)
class SwimConfig:
    """The membership protocol's (SWIM's) timings; memberlist's LAN profile by default."""

    probe_interval: float = option(1.0, help="seconds between this peer's probes, one member each")
    probe_timeout: float = option(
        0.5, help="seconds a probe waits for its answer before asking others to try"
    )
    indirect_checks: int = option(3, help="members asked to probe one that did not answer")
    suspicion_mult: int = option(
        4,
        help="a suspect is declared dead after this many probe intervals (times log10 of the "
        "cluster's size past 10 members; up to 6 times longer while no other member confirms)",
    )
    push_pull_interval: float = option(
        30.0, help="seconds between full exchanges of the member list with one member"
    )
    reconnect_interval: float = option(
        30.0,
        flag="--reconnect-interval",
        metavar="SECONDS",
        help="seconds between tries to reach members declared dead (and the --join "
        "addresses): how a partition heals (default: {default})",
    )
    reconnect_timeout: float = option(
        24 * 3600.0,
        flag="--reconnect-timeout",
        metavar="SECONDS",
        help="seconds a member declared dead is still tried; with --replicas 2, also how "
        "long a host whose every copy is on such members waits for one of them before it "
        "is crawled afresh (default: a day)",
    )
    # The lease is what keeps two peers off one host during a partition.
    majority_lease: float = option(
        3.0,
        flag="--majority-lease",
        metavar="SECONDS",
        help="fetch only while a majority of the cluster was heard from within this many "
        "seconds; the majority waits longer than this (with margin) before taking a lost "
        "peer's hosts over (default: {default})",
    )

    def __post_init__(self) -> None:
        positive(
            self,
            "probe_interval",
            "probe_timeout",
            "push_pull_interval",
            "reconnect_interval",
            "majority_lease",
        )
        at_least(self, 0, "reconnect_timeout", infinite=True)
        if not self.probe_timeout < self.probe_interval:
            raise ConfigError(
                f"must be shorter than probe_interval ({show(self.probe_interval)}), "
                f"not {show(self.probe_timeout)}",
                "probe_timeout",
            )
        at_least(self, 0, "indirect_checks")
        at_least(self, 1, "suspicion_mult")

    def machine(self) -> MembershipConfig:
        """The membership state machine's settings: these, the rest its defaults."""
        return MembershipConfig(
            probe_interval=self.probe_interval,
            probe_timeout=self.probe_timeout,
            indirect_checks=self.indirect_checks,
            suspicion_mult=self.suspicion_mult,
            push_pull_interval=self.push_pull_interval,
            reconnect_interval=self.reconnect_interval,
            reconnect_timeout=self.reconnect_timeout,
        )


@dataclass(frozen=True, slots=True)
class ControlConfig:
    """The control centre: dashboard, /api/status, /metrics, seed and stop over HTTP."""

    address: str | None = option(
        None,
        flag="--control",
        metavar="ADDR",
        help="serve the control centre (dashboard, /api/status, /metrics, seed and stop) "
        "on ADDR, e.g. 127.0.0.1:8080; loopback only unless --control-public",
    )
    public: bool = option(
        False,
        flag="--control-public",
        help="let --control bind a non-loopback address (needs --secret)",
    )

    def __post_init__(self) -> None:
        if self.public and self.address is None:
            # Said, not ignored: the operator meant a control centre that is not there.
            raise ConfigError("needs --control ADDR: there is no control centre to open", "public")
