"""The ground truth: what a correct crawl of the default web requests, and what it must not."""

from __future__ import annotations

import pytest

from ubipy.synthweb import SyntheticWeb, WebSpec, ground_truth

WEB = SyntheticWeb()
S = WEB.specials
TRUTH = ground_truth(WEB, [WEB.seed_url()])


def test_contains_the_seed_every_reachable_robots_txt_and_ordinary_pages() -> None:
    assert WEB.seed_url() in TRUTH
    for host in WEB.host_names():
        assert f"http://{host}/robots.txt" in TRUTH
    assert "http://h007.synth.test/robots-real.txt" in TRUTH  # the robots redirect hop
    for page in ("/", "/s1/p1.html", "/s1/p19.html"):
        assert f"http://h011.synth.test{page}" in TRUTH
    assert "http://h005.synth.test/s1/p19.html" in TRUTH  # robots succeeded on attempt 3


def test_includes_redirect_targets_links_through_odd_markup_and_error_pages() -> None:
    for name in (
        "redirect_301", "redirect_301_target", "redirect_302", "redirect_302_target",
        "chain_start", "chain_end", "loop_a", "loop_b", "base_page", "base_only",
        "base_sibling", "tilde", "tilde_only", "area_target", "iframe_target", "frame_left",
        "frame_right", "meta_nofollow", "allowed_prefix", "allowed_pdf_query",
        "allowed_by_allow", "not_found", "server_error", "image", "pdf",
    ):  # fmt: skip
        assert S[name] in TRUTH, name


def test_excludes_nofollow_disallowed_out_of_scope_and_error_body_links() -> None:
    for name in (
        "nofollow_a", "nofollow_b", "meta_only_a", "meta_only_b", "disallowed_subtree",
        "disallowed_dir", "disallowed_pdf", "disallowed_wildcard", "disallowed_h5",
        "disallowed_h7", "out_of_scope", "error_only", "not_found_only", "inline_image",
    ):  # fmt: skip
        assert S[name] not in TRUTH, name
    # robots.txt of h006 always fails: its robots.txt is requested, none of its pages.
    assert [u for u in TRUTH if "h006" in u] == ["http://h006.synth.test/robots.txt"]
    assert all("%" not in u and "#" not in u and ":80" not in u for u in TRUTH)


def test_robots_attempts_bound_the_transient_host() -> None:
    truth = ground_truth(WEB, [WEB.seed_url()], robots_attempts=2)
    assert [u for u in truth if "h005" in u] == ["http://h005.synth.test/robots.txt"]
    patient = SyntheticWeb(WebSpec(robots_transient_failures=0))
    assert "http://h005.synth.test/" in ground_truth(patient, [patient.seed_url()])


def test_max_depth() -> None:
    assert ground_truth(WEB, [WEB.seed_url()], max_depth=0) == {
        WEB.seed_url(),
        "http://h000.synth.test/robots.txt",
    }
    depth1 = ground_truth(WEB, [WEB.seed_url()], max_depth=1)
    assert "http://h011.synth.test/" in depth1 and S["base_page"] not in depth1
    depth2 = ground_truth(WEB, [WEB.seed_url()], max_depth=2)
    # a redirect keeps its source's depth: the whole chain is at depth 2
    assert {S["chain_end"], S["redirect_302_target"], S["base_page"]} <= depth2
    assert S["base_only"] not in depth2  # depth 3
    assert depth1 < depth2 < TRUTH


@pytest.mark.parametrize("scope", ["host", "domain", "any"])
def test_scope(scope: str) -> None:
    truth = ground_truth(WEB, [WEB.seed_url()], scope=scope)
    hosts = {u.split("/")[2] for u in truth}
    if scope == "host":
        # h000's robots.txt names a sitemap on h001 (a cross-submission): read whatever
        # the scope, under h001's robots.txt, and what it lists of h000 taken.
        assert hosts == {"h000.synth.test", "h001.synth.test"}
        assert {u for u in truth if "//h001." in u} == {
            "http://h001.synth.test/robots.txt",
            "http://h001.synth.test/maps/cross.xml",
        }
        assert "http://h000.synth.test/from-sitemap/cross-1.html" in truth
    elif scope == "domain":
        assert hosts == set(WEB.host_names())
    else:
        assert {S["out_of_scope"], "http://www.outside.example/robots.txt"} <= truth
        assert hosts == {*WEB.host_names(), "www.outside.example"}
    with pytest.raises(ValueError):
        ground_truth(WEB, [WEB.seed_url()], scope="world")


def test_seeds_are_normalised_and_several_seeds_combine() -> None:
    truth = ground_truth(WEB, ["HTTP://H008.SYNTH.TEST:80/old/page.html#x"], scope="host")
    assert truth == {
        "http://h008.synth.test/robots.txt",
        S["redirect_301"],
        S["redirect_301_target"],
        "http://h008.synth.test/",
    } | {u for u in TRUTH if u.startswith("http://h008.synth.test/")}
