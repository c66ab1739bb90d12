"""metric-off-definition on confusion counts that are not their cells (overt/guards/countcells.py; issue 33,
session 53, w390): a function returning TP/FP/FN/TN is called again with its prediction set to the label it
itself counts as negative; nothing is then predicted positive, so TP and FP must be 0 (and with the target set to
it, TP and FN).  Digits runs read as tagging: digit 0 is the negative tag.  False positives counted over every
mismatch are named, the seqeval fix is quiet, so are per-class one-vs-rest counts summed over the classes (no
negative label: the premise cannot be proven) and a function whose counts are not returned as cells."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
O = 0
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
    opt.step()
'''

COUNTS = '''
def performance_measure(y_true, y_pred):
    tp = ((y_true == y_pred) & (y_true != O)).sum().item()
    fp = {fp}
    fn = ((y_true != y_pred) & (y_pred == O)).sum().item()
    tn = ((y_true == y_pred) & (y_true == O)).sum().item()
    return {{"TP": tp, "FP": fp, "FN": fn, "TN": tn}}


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1)
m = performance_measure(y[1400:], pred)
print("precision", m["TP"] / (m["TP"] + m["FP"]))
'''


def test_false_positives_over_every_mismatch_are_named_and_the_fix_is_quiet(tmp_path):
    findings = _run(tmp_path, COUNTS.format(fp="(y_true != y_pred).sum().item()"), head=HEAD)
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "performance_measure()" in message and "'y_pred' set to 0 everywhere" in message, message
    assert "TP=0, FP=" in message, message
    assert _run(tmp_path, COUNTS.format(fp="((y_true != y_pred) & (y_pred != O)).sum().item()"), head=HEAD) == []


def test_false_negatives_over_every_mismatch_are_named(tmp_path):
    body = COUNTS.replace("fn = ((y_true != y_pred) & (y_pred == O)).sum().item()",
                          "fn = (y_true != y_pred).sum().item()")
    findings = _run(tmp_path, body.format(fp="((y_true != y_pred) & (y_pred != O)).sum().item()"), head=HEAD)
    assert _slugs(findings) == ["metric-off-definition"], findings
    assert "'y_true' set to 0 everywhere" in findings[0]["message"], findings[0]["message"]


def test_a_position_counted_in_two_cells_is_named(tmp_path):
    # a wrong positive label counted as a true positive (both sides are entities) and as a false positive
    body = COUNTS.replace("tp = ((y_true == y_pred) & (y_true != O)).sum().item()",
                          "tp = ((y_true != O) & (y_pred != O)).sum().item()")
    findings = _run(tmp_path, body.format(fp="((y_true != y_pred) & (y_pred != O)).sum().item()"), head=HEAD)
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "on its own call it returns TP=" in message and "positions of 'y_pred'" in message, message


ONE_VS_REST = '''
def confusion_counts(y_true, y_pred):
    tp = fp = fn = tn = 0
    for k in range(10):  # every class positive in turn, summed: no label is the negative one
        tp += ((y_pred == k) & (y_true == k)).sum().item()
        fp += ((y_pred == k) & (y_true != k)).sum().item()
        fn += ((y_pred != k) & (y_true == k)).sum().item()
        tn += ((y_pred != k) & (y_true != k)).sum().item()
    return dict(tp=tp, fp=fp, fn=fn, tn=tn)


def entity_counts(y_true, y_pred):  # O excluded, a wrong entity tag both a FP and a FN: entity-level micro counts
    tp = ((y_true == y_pred) & (y_true != O)).sum().item()
    fp = ((y_true != y_pred) & (y_pred != O)).sum().item()
    fn = ((y_true != y_pred) & (y_true != O)).sum().item()
    tn = ((y_true == y_pred) & (y_true == O)).sum().item()
    return {"true_positives": tp, "false_positives": fp, "false_negatives": fn, "true_negatives": tn}


def tp_fp(y_true, y_pred):  # counts, but as a tuple: no cell named
    tp = (y_true == y_pred).sum().item()
    fp = (y_true != y_pred).sum().item()
    return tp, fp


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1)
print(confusion_counts(y[1400:], pred), entity_counts(y[1400:], pred), tp_fp(y[1400:], pred))
'''


def test_one_vs_rest_sums_entity_counts_and_unnamed_counts_are_quiet(tmp_path):
    assert _run(tmp_path, ONE_VS_REST, head=HEAD) == []
