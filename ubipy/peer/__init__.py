"""A running peer: the crawl loop, the router and its outboxes, acknowledgements,
hand-off on ring changes, replicas, and the :class:`Peer` that composes them with
membership and the links in one trio nursery; the crawl order's part in the crawl loop
(:class:`Ordering`) and a continuous crawl's (:class:`Refresher`); and
:func:`settle_collector`, the garbage collector set for a process that runs a peer.
"""

from ubipy.peer.collector import settle_collector
from ubipy.peer.crawler import Crawler
from ubipy.peer.crawlstats import SeedResult
from ubipy.peer.ordering import Ordering
from ubipy.peer.peer import Peer
from ubipy.peer.refreshing import Refresher
from ubipy.peer.status import PeerStatus

__all__ = [
    "Crawler",
    "Ordering",
    "Peer",
    "PeerStatus",
    "Refresher",
    "SeedResult",
    "settle_collector",
]
