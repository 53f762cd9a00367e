from __future__ import annotations

from ubipy.config import BoundsConfig, Scope
from ubipy.fetch import ScopeFilter, host_key, parse_html
from ubipy.peer.crawlstats import CrawlStats
from ubipy.peer.discovery import candidates

PAGE = b"""<a href="/a">a</a> <a href="b.html">b</a> <a href="https://a.test:8443/c">c</a>
<a href="http://u:p@b.test/d">d</a> <a href="http://other.test/e">e</a>"""


def test_a_pages_links_are_admitted_with_the_hosts_the_parser_found() -> None:
    # The parser gives each link's host key; candidates takes it instead of reading
    # it again from the URL, and must come to the same URLs, hosts and scope verdicts.
    parsed = parse_html(PAGE, "http://a.test/dir/")
    scope = ScopeFilter.of(BoundsConfig(scope=Scope.DOMAIN), ["a.test", "b.test"])
    with_hosts, without = CrawlStats(), CrawlStats()
    given = candidates(
        parsed.links, None, 1, scope=scope, max_path_repeats=3, stats=with_hosts, hosts=parsed.hosts
    )
    read = candidates(parsed.links, None, 1, scope=scope, max_path_repeats=3, stats=without)
    assert given == read
    assert [(u.url, u.host) for u in given] == [
        ("http://a.test/a", "a.test"),
        ("http://a.test/dir/b.html", "a.test"),
        ("https://a.test:8443/c", "a.test:8443"),
        ("http://b.test/d", "b.test"),
    ]
    assert all(u.host == host_key(u.url) for u in given)
    assert with_hosts.out_of_scope == without.out_of_scope == 1  # other.test
