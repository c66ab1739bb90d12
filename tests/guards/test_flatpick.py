"""choice-over-flat-curve (issue 33; tests/wild w399): a decision threshold chosen by argmax of an F1 curve
computed on a validation set without positives (every F1 zero) -- with torch on a stacked curve and with numpy
on a list -- each beside its twin whose validation set holds positives; a row of a Q-table (a view), integer
vote counts and a batch's 2-D argmax stay silent.  Real small runs on the digits."""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _scorer() -> tuple[nn.Module, list, str, object]:
    """A logistic 'is it a zero' scorer trained for a few steps under a guard."""
    torch.manual_seed(0)
    x, y = digits()
    target = (y == 0).float()
    model = nn.Linear(64, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(12):
        xb, yb = x[64 * i:64 * (i + 1)], target[64 * i:64 * (i + 1)]
        loss = F.binary_cross_entropy_with_logits(model(xb).squeeze(1), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return model, x, target, g


def _f1(pred: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    tp = (pred & (labels == 1)).sum().float()
    fp = (pred & (labels == 0)).sum().float()
    fn = (~pred & (labels == 1)).sum().float()
    return 2 * tp / (2 * tp + fp + fn) if tp > 0 else torch.tensor(0.0)


def _threshold(with_positives: bool, numpy: bool, eval_mode: bool = True) -> tuple[list, str]:
    model, x, target, g = _scorer()
    val = slice(1000, 1200)
    xv, yv = x[val], target[val]
    if not with_positives:
        keep = yv == 0
        xv, yv = xv[keep], yv[keep]
    if eval_mode:
        model.eval()  # torch's argmax is seen while a model's evaluation is watched
    with torch.no_grad():  # without eval(): a model the mode does not change, evaluated under no_grad
        scores = model(xv).squeeze(1)
    grid = torch.linspace(float(scores.min()), float(scores.max()), 20)
    if numpy:
        curve = [float(_f1(scores >= t, yv)) for t in grid]
        best = grid[int(np.argmax(curve))]
    else:
        curve = torch.stack([_f1(scores >= t, yv) for t in grid])
        best = grid[curve.argmax()]
    assert best.numel() == 1
    return g.report(), g.session.options.stream.getvalue()


def test_an_argmax_over_an_all_zero_f1_curve_is_named_at_its_call():
    findings, text = _threshold(with_positives=False, numpy=False)
    assert slugs(findings) == ["choice-over-flat-curve"], text
    assert "Tensor.argmax at tests/guards/test_flatpick.py:" in text and "all 0" in text, text


def test_numpy_argmax_over_a_list_of_zero_f1s_is_named():
    findings, text = _threshold(with_positives=False, numpy=True)
    assert slugs(findings) == ["choice-over-flat-curve"], text
    assert "np.argmax at tests/guards/test_flatpick.py:" in text, text


def test_a_curve_with_positives_is_silent():
    for numpy in (False, True):
        findings, text = _threshold(with_positives=True, numpy=numpy)
        assert slugs(findings) == [], text


def test_table_rows_counts_and_batches_are_silent():
    model, x, target, g = _scorer()
    q_table = torch.zeros(5, 4)  # a fresh Q-table: its rows are views, ties broken by the first action
    actions = [int(q_table[s].argmax()) for s in range(5)]
    votes = torch.bincount(torch.tensor([1, 2, 3]), minlength=4)  # integer counts, a tie
    with torch.no_grad():
        logits = torch.zeros(8, 3)  # a batch's predictions: a 2-D argmax
        preds = logits.argmax(1)
    np_votes = np.argmax(np.array([2, 2, 2]))
    assert actions == [0] * 5 and int(votes.argmax()) == 1 and preds.sum() == 0 and np_votes == 0
    findings = g.report()
    assert slugs(findings) == [], g.session.options.stream.getvalue()


def test_ties_at_a_call_site_that_later_chooses_from_varied_values_are_silent():
    """A bandit's value estimates start at zero (np.zeros: a whole array, not a view) and are chosen from by argmax
    every pull: the first pulls break a tie on purpose, later ones choose from estimates that differ."""
    model, x, target, g = _scorer()
    rng = np.random.default_rng(0)
    means = np.array([0.1, 0.5, 0.9, 0.3])
    values, counts = np.zeros(4), np.zeros(4)
    for t in range(60):
        greedy = int(np.argmax(values))  # flat at first: every estimate is still zero
        arm = int(rng.integers(4)) if rng.random() < 0.3 else greedy
        reward = float(rng.random() < means[arm])
        counts[arm] += 1
        values[arm] += (reward - values[arm]) / counts[arm]
    findings = g.report()
    assert slugs(findings) == [], g.session.options.stream.getvalue()


def test_a_flat_curve_scored_without_eval_is_named():
    """Session 56 (w399): the scores come from a no_grad forward of a model left in training mode (no Dropout or
    BatchNorm, so the mode changes nothing) and the curve is chosen from outside the no_grad block."""
    findings, text = _threshold(with_positives=False, numpy=False, eval_mode=False)
    assert slugs(findings) == ["choice-over-flat-curve"], text
    assert "Tensor.argmax at tests/guards/test_flatpick.py:" in text, text


def test_a_curve_with_positives_scored_without_eval_is_silent():
    findings, text = _threshold(with_positives=True, numpy=False, eval_mode=False)
    assert slugs(findings) == [], text


def test_torch_argmax_is_put_back_when_training_resumes():
    """The window a training-mode no_grad forward opens closes at the next training forward: the training steps
    after it run torch's own argmax."""
    original = torch.Tensor.argmax
    model, x, target, g = _scorer()
    with torch.no_grad():
        model(x[:8])
    assert torch.Tensor.argmax is not original  # the evaluation's window
    loss = F.binary_cross_entropy_with_logits(model(x[:64]).squeeze(1), target[:64])
    loss.backward()
    assert torch.Tensor.argmax is original
    g.report()


def test_a_model_with_dropout_left_in_training_mode_opens_no_window():
    """Under no_grad in training mode a model with Dropout is not evaluated (its outputs are still sampled): no
    window, a flat curve chosen then is not judged."""
    torch.manual_seed(0)
    x, y = digits()
    model = nn.Sequential(nn.Linear(64, 16), nn.Dropout(0.1), nn.Linear(16, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(12):
        loss = F.binary_cross_entropy_with_logits(model(x[64 * i:64 * (i + 1)]).squeeze(1),
                                                  (y[64 * i:64 * (i + 1)] == 0).float())
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        model(x[:8])
    curve = torch.zeros(10)
    assert int(curve.argmax()) == 0
    findings = g.report()  # (train-mode-in-eval names the forward itself)
    assert "choice-over-flat-curve" not in slugs(findings), g.session.options.stream.getvalue()


def test_greedy_actions_of_a_policy_in_training_mode_are_silent():
    """An agent's no_grad action choices between its updates (a model in training mode, the argmax over one state's
    action values, which differ) open the window and stay silent."""
    torch.manual_seed(0)
    policy = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 3))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
    g = guarded(policy, opt, ignore=TIMING)
    for step in range(30):
        state = torch.randn(4)
        with torch.no_grad():
            action = int(policy(state).argmax())
        loss = -policy(state)[action] * 0.01
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings = g.report()
    assert slugs(findings) == [], g.session.options.stream.getvalue()


def test_a_flat_choice_made_while_training_goes_on_is_silent():
    """In a training-mode window only the first few no_grad forwards open the window: a choice made between steps
    (an agent's greedy action over values a zero-initialised head makes all equal) has later calls that no window
    sees, so a flat curve there, followed by more training steps, is not judged."""
    torch.manual_seed(0)
    x, y = digits()
    model = nn.Linear(64, 1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(12):
        xb, yb = x[64 * i:64 * (i + 1)], (y[64 * i:64 * (i + 1)] == 0).float()
        with torch.no_grad():
            model(xb)
        values = torch.zeros(4)  # what the greedy choice reads, all equal in these steps
        assert int(values.argmax()) == 0
        loss = F.binary_cross_entropy_with_logits(model(xb).squeeze(1), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings = g.report()
    assert slugs(findings) == [], g.session.options.stream.getvalue()
