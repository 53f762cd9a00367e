"""The seed thesis's schemes compute exactly its formulas (chapter 4.1.4)."""

from __future__ import annotations

import pytest

from ubipy.ring import ModuloPlacement, TwoLevelPlacement, host_point

HOSTS = [f"h{i:04d}.synth.test" for i in range(2000)]


def test_one_level_is_hash_mod_n_over_sorted_ids() -> None:
    placement = ModuloPlacement(["c", "a", "b"])
    for host in HOSTS:
        assert placement.owner(host) == ["a", "b", "c"][host_point(host) % 3]


def test_two_level_follows_the_thesis_formulas() -> None:
    roster = ["n0", "n1", "n2", "n3", "n4"]
    live = ["n0", "n2", "n3", "extra"]
    placement = TwoLevelPlacement(live, roster=roster, logic_num=7)
    id_array_logic = [m in live for m in roster] + [False, False]
    id_array_physic = sorted(live)
    for host in HOSTS:
        h = host_point(host)
        id_logic = h % 7
        if id_array_logic[id_logic]:
            expected = roster[id_logic]
        else:
            expected = id_array_physic[h % len(id_array_physic)]
        assert placement.owner(host) == expected


def test_the_default_roster_is_the_members_in_id_order() -> None:
    placement = TwoLevelPlacement(["b", "a", "c"])
    assert placement.roster == ("a", "b", "c")
    assert placement.logic_num == 3
    modulo = ModuloPlacement(["a", "b", "c"])
    # With every planned node alive, the second level never applies.
    assert [placement.owner(h) for h in HOSTS] == [modulo.owner(h) for h in HOSTS]


def test_a_member_outside_the_plan_gets_only_orphaned_hosts() -> None:
    full = TwoLevelPlacement(["a", "b", "new"], roster=["a", "b"])
    assert "new" not in {full.owner(h) for h in HOSTS}
    orphaned = TwoLevelPlacement(["a", "new"], roster=["a", "b"])
    assert "new" in {orphaned.owner(h) for h in HOSTS}


def test_the_plan_is_checked() -> None:
    with pytest.raises(ValueError, match="distinct"):
        TwoLevelPlacement(["a"], roster=["a", "a"])
    with pytest.raises(ValueError, match="logic_num"):
        TwoLevelPlacement(["a"], roster=["a", "b"], logic_num=1)
