"""A Finding carries why and fix on their own, like OvertError: given as fields, never parsed
back out of the message."""

from overt.catalog import lookup
from overt.findings import Finding


def test_a_finding_takes_its_fix_as_a_field_and_its_why_from_the_catalog():
    f = Finding("stale-gradients", "gradients summed over steps. Fix: call optimizer.zero_grad() once per step.",
                fix="call optimizer.zero_grad() once per step.")
    assert f.fix == "call optimizer.zero_grad() once per step."
    assert f.why == lookup("stale-gradients").why
    assert f.to_dict()["fix"] == f.fix and f.to_dict()["why"] == f.why


def test_given_why_and_fix_win_and_the_message_is_not_parsed():
    f = Finding("non-finite", "loss is nan", why="the weights are garbage", fix="lower the lr")
    assert (f.why, f.fix) == ("the weights are garbage", "lower the lr")
    assert Finding("non-finite", "loss is nan. Fix: lower the lr").fix == ""
    assert Finding("non-finite", "loss is nan; lower the lr", path="t.py").fix == ""
