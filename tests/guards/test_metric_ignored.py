"""metric-off-definition on metrics that score the positions the training loss ignored
(overt/guards/ignoredpreds.py; issue 33, session 52, w361): a metric function of the evaluation is called again
with its predictions changed only where the target is the label the training loss ignored; its value must not
move.  Digits runs with part of the labels withheld: a macro F1 that counts unlabelled samples (-1, outside the
classes) as false positives of the class predicted there, and a mean IoU that drops the ignored class's own score
but keeps its samples in the other classes' unions, are named; their twins (the ignored positions dropped first)
are quiet, and so is a metric over every class that does not say it ignores an in-range class."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

HEAD = '''
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import f1_score
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
IGNORE_INDEX = {ignore}
withheld = torch.rand(len(y), generator=torch.Generator().manual_seed(1)) < 0.2
labels = {labels}
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(60):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), labels[i:i + 32], ignore_index=IGNORE_INDEX).backward()
    opt.step()
'''

UNLABELLED = HEAD.format(ignore=-1, labels="torch.where(withheld, -1, y)")
IN_RANGE = HEAD.format(ignore=9, labels="y")

MACRO_F1 = '''
def macro_f1(y_pred, y_true):
    keep = {keep}
    return f1_score(y_true[keep], y_pred[keep], average="macro")


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1).numpy()
print("val macro F1", macro_f1(pred, labels[1400:].numpy()))
'''


def test_a_macro_f1_scoring_unlabelled_samples_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, MACRO_F1.format(keep="slice(None)"), head=UNLABELLED)
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "ignored label -1" in message and "outside its 10 classes" in message, message
    assert _run(tmp_path, MACRO_F1.format(keep="y_true != IGNORE_INDEX"), head=UNLABELLED) == []


MEAN_IOU = '''
def mean_iou(pred, target):
    {mask}
    scores = []
    for k in range(10):
        if k == IGNORE_INDEX:
            continue
        inter = ((pred == k) & (target == k)).sum()
        union = ((pred == k) | (target == k)).sum()
        scores.append(float(inter) / float(union))
    return sum(scores) / len(scores)


def accuracy(pred, target):  # every class, the ignored one too: it does not say it ignores it
    return (pred == target).float().mean().item()


model.eval()
with torch.no_grad():
    pred = model(x[1400:]).argmax(1)
print("val mIoU", mean_iou(pred, y[1400:]), "val accuracy", accuracy(pred, y[1400:]))
'''


def _own(findings: list[dict]) -> list[dict]:
    """The findings beside the warning that an in-range ignore_index is a class (the head's own choice)."""
    return [f for f in findings if f["slug"] != "ignore-index-is-class"]


def test_a_mean_iou_keeping_the_ignored_class_in_the_unions_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _own(_run(tmp_path, MEAN_IOU.format(mask="pass"), head=IN_RANGE))
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "mean_iou()" in message and "IGNORE_INDEX = 9" in message, message
    twin = MEAN_IOU.format(mask="keep = target != IGNORE_INDEX; pred, target = pred[keep], target[keep]")
    assert _own(_run(tmp_path, twin, head=IN_RANGE)) == []
