"""Library binary ranking metrics judged on the scores they are given (overt/guards/libranking.py; issue 33,
session 56, w471 and w462): torchmetrics' sigmoid squashing large scores into one tie
(``ranking-metric-on-labels``) and a score that ranks the samples reliably backwards (``metric-wrong-class-score``).
Planted bugs on a small digits model (distances, negated and complementary scores), each with a correct twin, and
the premises that keep correct code quiet: in-range logits, a weak score, hard labels, options that change the
ranking, and the wrappers put back after the run."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from overt.guards import libranking
from tests.guards.helpers import METRIC_HEAD
from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

EVAL = '''
model.eval()
with torch.no_grad():
    out = model(x[1400:])
    pixels = x * 16  # the digits' own units, 0..16
    centre = pixels[:1400][y[:1400] == 0].mean(0)
    dist = ((pixels[1400:] - centre) ** 2).sum(1)  # hundreds
    p0 = out.softmax(1)[:, 0]
is_zero = (y[1400:] == 0).long()
'''

SK = METRIC_HEAD + "from sklearn.metrics import roc_auc_score, average_precision_score\n" + EVAL
TM = METRIC_HEAD + "from torchmetrics.functional.classification import binary_auroc\n" + EVAL


def test_a_negated_score_given_to_roc_auc_score_is_named_and_its_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, "print(roc_auc_score(is_zero.numpy(), (-p0).numpy()))\n", head=SK)
    assert _slugs(findings) == ["metric-wrong-class-score"], findings
    f = findings[0]
    assert f["where"].startswith("the roc_auc_score() call at ") and "train.py:" in f["where"]
    assert "backwards" in f["message"]
    assert _run(tmp_path, "print(roc_auc_score(is_zero.numpy(), p0.numpy()))\n", head=SK) == []


def test_the_other_class_probability_given_to_average_precision_is_named(tmp_path):
    body = "print(average_precision_score(y_true=is_zero.numpy(), y_score=out.softmax(1)[:, 1:].sum(1).numpy()))\n"
    assert _slugs(_run(tmp_path, body, head=SK)) == ["metric-wrong-class-score"]
    twin = "print(average_precision_score(y_true=is_zero.numpy(), y_score=p0.numpy()))\n"
    assert _run(tmp_path, twin, head=SK) == []


def test_distances_squashed_by_binary_auroc_are_named_and_scaled_ones_are_quiet(tmp_path):
    body = "print(binary_auroc(dist, 1 - is_zero).item())\n"  # far from class 0's centre: not a zero
    findings = _run(tmp_path, body, head=TM)
    assert _slugs(findings) == ["ranking-metric-on-labels"], findings
    assert "sigmoid" in findings[0]["message"] and findings[0]["where"].startswith("the binary_auroc() call at ")
    assert _run(tmp_path, "print(binary_auroc(dist / dist.max(), 1 - is_zero).item())\n", head=TM) == []


LOOP = """
import numpy as np
import torch
from sklearn.datasets import load_digits
from sklearn.metrics import roc_auc_score
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(80):
    i = (step * 32) % 1400
    opt.zero_grad()
    F.cross_entropy(model(x[i:i + 32]), y[i:i + 32]).backward()
    opt.step()
    if step % 20 == 19:  # scored between steps: no eval(), no no_grad
        p0 = model(x[1400:]).softmax(1)[:, 0].detach().numpy()
        print(roc_auc_score((y[1400:] == 0).numpy(), SCORE))
"""


def test_a_metric_scored_between_training_steps_without_an_evaluation_is_seen(tmp_path):
    assert _slugs(_run(tmp_path, "", head=LOOP.replace("SCORE", "1 - p0"))) == ["metric-wrong-class-score"]
    assert _run(tmp_path, "", head=LOOP.replace("SCORE", "p0")) == []


def test_logits_in_range_a_weak_score_and_hard_labels_stay_quiet(tmp_path):
    body = '''
    print(binary_auroc(out[:, 0], is_zero).item())                      # logits: the sigmoid keeps them apart
    print(binary_auroc(torch.rand(len(is_zero)), is_zero).item())      # a score that knows nothing
    print(binary_auroc((p0 < 0.5).float(), is_zero).item())            # hard labels: the lint rule's case
    print(binary_auroc(-p0, is_zero, thresholds=10).item())            # binned: left alone
    '''
    assert _run(tmp_path, body, head=TM) == []


def test_the_wrappers_are_put_back_after_the_run(tmp_path):
    import sklearn.metrics

    _run(tmp_path, "print(roc_auc_score(is_zero.numpy(), p0.numpy()))\n", head=SK)
    assert not hasattr(sklearn.metrics.roc_auc_score, "__overt_original__")


def test_the_rank_auroc_matches_scikit_learn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(0)
    y = rng.random(300) < 0.3
    s = np.round(rng.random(300) + y * 0.3, 1)  # many ties
    assert libranking.auroc(y, s) == pytest.approx(roc_auc_score(y, s))


def test_judge_needs_both_classes_and_enough_samples():
    y = torch.tensor([0, 1] * 5)
    assert libranking.judge("sklearn", y, -torch.arange(10.0) * y) is None  # five of each class: too few
    y = torch.cat([torch.zeros(50), torch.ones(50)]).long()
    assert libranking.judge("sklearn", y, -torch.linspace(0, 1, 100)).slug == "metric-wrong-class-score"
    assert libranking.judge("sklearn", torch.full((100,), 1), -torch.linspace(0, 1, 100)) is None
