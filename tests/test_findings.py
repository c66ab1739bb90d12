"""A Finding carries why and fix on their own, like OvertError."""

from overt.catalog import lookup
from overt.findings import Finding


def test_a_guard_finding_reads_its_fix_from_the_message_and_its_why_from_the_catalog():
    f = Finding("stale-gradients", "gradients summed over steps. Fix: call optimizer.zero_grad() once per step.")
    assert f.fix == "call optimizer.zero_grad() once per step."
    assert f.why == lookup("stale-gradients").why
    assert f.to_dict()["fix"] == f.fix and f.to_dict()["why"] == f.why


def test_given_why_and_fix_win_and_a_message_without_a_fix_has_none():
    f = Finding("non-finite", "loss is nan", why="the weights are garbage", fix="lower the lr")
    assert (f.why, f.fix) == ("the weights are garbage", "lower the lr")
    assert Finding("non-finite", "loss is nan; really").fix == ""  # runtime messages: only "Fix:" counts
    assert Finding("non-finite", "loss is nan; lower the lr", path="t.py").fix == "lower the lr"
