"""What a peer reports of itself: the figures behind ``ubipy status``, the progress
line and the control centre's rows."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import trio

from ubipy import __version__
from ubipy.config import CrawlConfig
from ubipy.fetch import FetchOutcome, Filtered, SlowHost
from ubipy.net import Links, Network, request
from ubipy.peer.crawler import Crawler
from ubipy.peer.handoff import Handoff
from ubipy.peer.ipleases import LeaseStats
from ubipy.peer.router import Router
from ubipy.wire import MemberRow, Status, StatusRequest

# Hosts each peer reports among its slowest.
SLOWEST_REPORTED = 5


@dataclass(frozen=True, slots=True)
class PeerStatus:
    peer_id: str
    address: str
    version: str
    started_at: float
    uptime: float
    pages: int
    pages_per_second: float
    errors: int
    timeouts: int
    # Failed requests whose server's certificate did not verify (never retried).
    certificate_errors: int
    pending: int
    hosts: int
    in_flight: int
    bytes_in: int
    robots_disallowed: int
    out_of_scope: int
    # Sitemaps answered, the URLs they listed, those skipped past the protocol's
    # limits, the sitemaps read only in part (over 50 MB, or cut), and those read up
    # to a fault (malformed, a bad gzip stream, not a sitemap).
    sitemaps: int
    sitemap_urls: int
    sitemap_skipped: int
    sitemaps_cut: int
    links_cut: int
    # URLs whose userinfo (user:pass@) was stripped: a credential is never stored.
    credentials_stripped: int
    # Seeds and links dropped by --exclude, and by matching no --include.
    excluded: int
    not_included: int
    # Answers of a type not accepted (--accept): how many, and by family
    # ("image 12, application 3").
    skipped_by_type: int
    skipped_types: str
    idle: bool
    storage_error: str | None
    forwarded_urls: int
    forward_backlog: int
    frames_out: int
    bytes_out_wire: int
    frames_rejected: int
    # Accepted connections we closed: too slow to authenticate, idle, pushed out by
    # newer strangers, refused when full, or cut for bad frames.
    connections_cut: int
    # Forwarding on the wire: URL_BATCH and URL_ACK frames sent, and their bytes.
    url_frames: int
    url_bytes: int
    handed_off_hosts: int
    handed_off_urls: int
    handed_off_bytes: int
    taken_over_hosts: int
    replica_bytes: int
    # The join attempt under way while the peer is alone (0: not joining).
    joining: int = 0
    # Why nothing is fetched now, if it is not (e.g. no majority in sight).
    paused: str | None = None
    # Why some hosts wait for other peers, if they have for a while (holds.py).
    holding: str | None = None
    # The hosts it goes slowest on, "host latency delay strikes" joined by "; "
    # (figures are flat): the control centre's slowest hosts.
    slowest_hosts: str = ""
    # Hosts with nothing to ask whose slots were forgotten (a bound on memory), so far.
    hosts_forgotten: int = 0
    # The DNS stage: lookups made (not answered from the cache), the most any one
    # host needed (1 until its answer expires), lookups that failed, hosts given up
    # for it, and hosts refused because their address may not be reached.
    dns_lookups: int = 0
    dns_most_per_host: int = 0
    dns_failures: int = 0
    dns_hosts_given_up: int = 0
    dns_served_stale: int = 0  # failed refreshes answered with the last address
    refused_addresses: int = 0
    # IP leases asked of addresses' owners (ipleases.py): granted, denied, unanswered
    # in time (the request went ahead on this peer's own per-IP rule), and renewals
    # denied (another held the address while a request of this peer's ran).
    ip_leases_granted: int = 0
    ip_leases_denied: int = 0
    ip_lease_timeouts: int = 0
    ip_lease_renewals_denied: int = 0
    # URLs closed without a request (robots.txt, a host's budget, a host given up),
    # by why ("why n; ..."), and in all; requests asked again; commits the shard refused.
    skipped: int = 0
    skipped_why: str = ""
    retries: int = 0
    # Pages whose last try still said "not now" once their retries were spent, by
    # status ("503: n; ..."), and in all.
    given_up: int = 0
    given_up_why: str = ""
    sitemaps_faulty: int = 0  # see sitemaps above
    storage_failures: int = 0
    # Links and entries left out as deeper than --max-depth (said nowhere before).
    too_deep: int = 0
    # Requests put back because the proxy could not be reached (a proxy down or wrong).
    proxy_down: int = 0
    no_sockets: int = 0  # requests put back: no file descriptor to be had
    # Frames to members whose dial went unanswered, sent by way of another (relays.py),
    # and frames this peer carried for two others that cannot reach each other.
    frames_relayed: int = 0
    frames_carried: int = 0
    # The settings every peer of a cluster must share (a JSON object of flag and
    # value), which `ubipy status` compares (shared_settings).
    settings: str = ""
    # Under --recrawl (its pages count every visit): visits of pages fetched before,
    # how many found the page unchanged (304s among them), and pages retired.
    refreshes: int = 0
    refreshes_unchanged: int = 0
    refreshes_not_modified: int = 0
    pages_retired: int = 0
    # Pages due again that robots.txt now forbids, put off (Refresher.barred).
    refreshes_barred: int = 0
    # This process: its frames' epoch, random at each start (two live processes under
    # one id, a data directory copied, tell each other apart by it: advertised.py).
    run: int = 0

    def as_json(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


def slow_hosts_figure(hosts: Iterable[SlowHost]) -> str:
    """The ``slowest_hosts`` figure, as the control centre reads it (``slow_hosts``). The
    robots.txt tries only where there are some: a control centre of the version before
    reads four fields, and dropped every row of five (a review)."""
    return "; ".join(
        f"{h.host} {h.latency:.3f} {h.delay:.3f} {h.strikes}"
        + (f" {h.robots_tries}" if h.robots_tries else "")
        for h in hosts
    )


def status_of(
    peer_id: str,
    address: str,
    started_wall: float,
    c: Crawler,
    links: Links,
    router: Router | None,
    handoff: Handoff,
    *,
    joining: int = 0,
    paused: str | None = None,
    ip_leases: LeaseStats | None = None,
) -> PeerStatus:
    uptime = max(trio.current_time() - c.stats.started_at, 1e-9)
    return PeerStatus(
        peer_id=peer_id,
        address=address,
        version=__version__,
        started_at=started_wall,
        uptime=uptime,
        pages=c.stats.pages,
        pages_per_second=c.stats.pages / uptime,
        errors=c.stats.errors,
        timeouts=c.stats.timeouts,
        certificate_errors=c.stats.certificate_errors,
        pending=c.pending,
        hosts=c.scheduler.hosts,
        hosts_forgotten=c.scheduler.idle_hosts.forgotten,
        in_flight=c.scheduler.requests,
        bytes_in=c.stats.bytes_in,
        robots_disallowed=c.stats.robots_disallowed,
        out_of_scope=c.stats.out_of_scope,
        sitemaps=c.stats.sitemaps,
        sitemap_urls=c.stats.sitemap_urls,
        sitemap_skipped=c.stats.sitemap_skipped,
        sitemaps_cut=c.stats.sitemaps_cut,
        sitemaps_faulty=c.stats.sitemaps_faulty,
        links_cut=c.stats.links_cut,
        credentials_stripped=c.stats.credentials_stripped,
        excluded=c.stats.filtered[Filtered.EXCLUDED],
        not_included=c.stats.filtered[Filtered.NOT_INCLUDED],
        too_deep=c.stats.too_deep + c.stats.filtered[Filtered.TOO_DEEP],
        skipped=c.stats.skipped.total(),
        skipped_why=_by_count(c.stats.skipped),
        retries=c.stats.retries,
        given_up=c.stats.given_up.total(),
        given_up_why=_by_count(c.stats.given_up),
        storage_failures=c.stats.storage_failures,
        proxy_down=c.stats.put_back[FetchOutcome.PROXY_DOWN],
        no_sockets=c.stats.put_back[FetchOutcome.NO_SOCKETS],
        skipped_by_type=c.stats.skipped_types.total(),
        skipped_types=", ".join(f"{k} {n}" for k, n in c.stats.skipped_types.most_common()),
        idle=c.scheduler.idle(),
        storage_error=c.storage_error,
        forwarded_urls=router.stats.forwarded_urls if router else 0,
        forward_backlog=router.backlog() if router else 0,
        frames_out=sum(links.stats.frames_out.values()),
        # Not the answers to `ubipy status` and `ubipy seed` (QA: a lone peer's grew with
        # each status asked): what the crawl and the cluster cost.
        bytes_out_wire=links.stats.bytes_out
        - links.stats.bytes_out_by["STATUS"]
        - links.stats.bytes_out_by["SEED_ACK"],
        frames_rejected=sum(links.stats.rejected.values()),
        connections_cut=sum(links.stats.cut.values()),
        url_frames=links.stats.frames_out["URL_BATCH"] + links.stats.frames_out["URL_ACK"],
        url_bytes=links.stats.bytes_out_by["URL_BATCH"] + links.stats.bytes_out_by["URL_ACK"],
        handed_off_hosts=handoff.stats.hosts_out,
        handed_off_urls=handoff.stats.urls_out,
        handed_off_bytes=links.stats.bytes_out_by["HANDOFF"],
        taken_over_hosts=handoff.stats.hosts_in,
        replica_bytes=links.stats.bytes_out_by["REPLICA"],
        joining=joining,
        paused=paused,
        holding=handoff.holding(trio.current_time()),
        slowest_hosts=slow_hosts_figure(
            c.scheduler.slowest(SLOWEST_REPORTED, now=trio.current_time())
        ),
        frames_relayed=links.relays.stats["sent"],
        frames_carried=links.relays.stats["forwarded"],
        settings=shared_settings(c.config),
        run=links.writer.epoch,
        **_refresh_figures(c),
        **_dns_figures(c),
        **_lease_figures(ip_leases),
    )


def _by_count(counts: Counter[str]) -> str:
    """ "why: n; ...", the most first."""
    return "; ".join(f"{why}: {n}" for why, n in counts.most_common())


def _dns_figures(c: Crawler) -> dict[str, int]:
    if c.dns is None:
        return {}
    resolver = c.dns.resolver
    stats = c.dns.stats
    return {
        "dns_lookups": resolver.total_lookups,
        "dns_most_per_host": resolver.most_lookups,
        "dns_failures": stats.failures,
        "dns_hosts_given_up": stats.hosts_given_up,
        "dns_served_stale": resolver.served_stale,
        "refused_addresses": stats.refused + c.stats.refused_addresses,
    }


def _lease_figures(stats: LeaseStats | None) -> dict[str, int]:
    if stats is None:
        return {}
    return {
        "ip_leases_granted": stats.granted,
        "ip_leases_denied": stats.denied,
        "ip_lease_timeouts": stats.timeouts,
        "ip_lease_renewals_denied": stats.renewals_denied,
    }


async def gather_status(
    members: tuple[MemberRow, ...],
    own: dict[str, Any],
    others: Sequence[str],
    secret: bytes,
    network: Network,
) -> Status:
    """The STATUS answer: the members as this peer sees them, its own figures, and
    the figures of each peer at ``others`` that answers within 2 s."""
    answers: list[Status] = []

    async def ask(address: str) -> None:
        try:
            answer = await request(address, secret, StatusRequest(), patience=2.0, network=network)
        except OSError:  # PermissionError included: a peer that will not say
            return
        if isinstance(answer, Status):
            answers.append(answer)

    async with trio.open_nursery() as nursery:
        for address in others:
            nursery.start_soon(ask, address)
    peers = [own, *(dict(p) for answer in answers for p in answer.peers)]
    return Status(members, tuple(peers))


def _refresh_figures(c: Crawler) -> dict[str, int]:
    """Status showed nothing of a continuous crawl's refreshes, and its pages counted
    visits, with nothing to tell them apart (QA)."""
    if c.refresher is None:
        return {}
    stats = c.refresher.stats
    return {
        "refreshes": stats.refreshes,
        # The 304s among them (QA: "15 unchanged, 45 of them 304s").
        "refreshes_unchanged": stats.unchanged + stats.not_modified,
        "refreshes_not_modified": stats.not_modified,
        "pages_retired": stats.retired,
        "refreshes_barred": stats.barred,
    }


def shared_settings(config: CrawlConfig) -> str:
    """The settings that decide what a cluster crawls, which each peer applies to its
    own hosts alone: peers started with others crawl each their hosts their own way,
    and nothing said so (QA: --scope host on one peer, any on another; --no-sitemaps
    on the owner of a host whose pages only its sitemap lists)."""
    bounds = config.bounds
    shared = {
        "--scope": bounds.scope.value,
        "--include": " ".join(bounds.include),
        "--exclude": " ".join(bounds.exclude),
        "--max-depth": "" if bounds.max_depth is None else str(bounds.max_depth),
        "--order": bounds.order.value,
        "--sitemaps": "on" if bounds.sitemaps else "off",
        "--accept": " ".join(config.fetch.accept),
        "--replicas": str(config.replication.replicas),
        "--recrawl": "on" if config.recrawl.recrawl else "off",
        # One peer without the rule asks no lease of an address's owner: its requests
        # overlap the others'.
        "--per-ip": "on" if config.politeness.per_ip else "off",
    }
    # JSON: a regex of --exclude may hold "; " or "=" (a review).
    return json.dumps(shared, separators=(",", ":"))
