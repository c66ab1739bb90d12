"""prediction-shape-mismatch at run time (overt/guards/predshape.py, issue 33 w66): in evaluation, a
prediction made from a model's outputs (argmax, argmin, max over a dim) compared with labels of another
shape is named at its line: a flat ``argmax()`` over the batch, a ``(B,)`` prediction against ``(B, 1)``
labels.  Predictions of the labels' shape, top-k comparisons and pairwise masks of the labels stay quiet."""

from __future__ import annotations

import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import guarded, mlp, slugs, train, val_batches


def _run(score) -> tuple[list, str, float]:
    saved = {n: vars(torch.Tensor).get(n) for n in ("__eq__", "argmax", "max", "eq")}
    originals = (torch.argmax, torch.eq, torch.max)
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    train(model, opt, steps=60)
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for xb, yb in val_batches(64):
            correct += float(score(model(xb), yb))
            total += len(yb)
    model.train()
    train(model, opt, steps=2)  # training resumes: the wrappers are put back
    assert (torch.argmax, torch.eq, torch.max) == originals
    assert {n: vars(torch.Tensor).get(n) for n in saved} == saved
    return g.report(), g.session.options.stream.getvalue(), correct / total


def test_a_flat_argmax_compared_with_the_labels_is_named_at_its_line():
    findings, text, acc = _run(lambda out, y: (torch.argmax(out) == y).sum())
    assert slugs(findings) == ["prediction-shape-mismatch"], text
    assert "test_prediction_shape.py:" in findings[0].where and "flattened batch" in findings[0].message
    assert acc < 0.2  # the metric the bug reports


def test_a_flat_argmin_of_derived_scores_with_eq_is_named():
    # a tensor of the latest output's very shape (-probabilities) counts as made from it
    findings, text, _ = _run(lambda out, y: (-out.softmax(1)).argmin().eq(y).sum())
    assert slugs(findings) == ["prediction-shape-mismatch"], text


def test_predictions_against_column_labels_broadcast_and_are_named():
    # LaBraM#15: output.max(-1)[-1] == targets with targets of shape (B, 1): a (B, B) table
    findings, text, acc = _run(lambda out, y: (out.max(-1)[-1] == y.view(-1, 1)).float().sum() / len(y))
    assert slugs(findings) == ["prediction-shape-mismatch"], text
    assert "(64, 64)" in findings[0].message
    assert acc < 0.2


def test_predictions_of_the_labels_shape_are_quiet():
    def score(out, y):
        pred = out.argmax(dim=1)
        top = out.topk(3, dim=1).indices
        _ = y.view(-1, 1) == y  # a pairwise mask of the labels themselves
        _ = top == y.view(-1, 1)  # top-k hits: (B, 3) against (B, 1)
        _ = out.argmax(1, keepdim=True) == y.view(-1, 1)
        _ = out.max() == out  # where the largest logit is
        return (pred == y).sum() + 0 * torch.eq(out.argmax(-1), y).sum()

    findings, text, acc = _run(score)
    assert findings == [], text
    assert acc > 0.7


def test_a_training_accuracy_on_unchecked_steps_costs_nothing_and_is_not_judged():
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    originals = (torch.argmax, vars(torch.Tensor).get("__eq__"))
    for xb, yb in val_batches(32):
        out = model(xb)
        loss = nn.functional.cross_entropy(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
        assert (torch.argmax, vars(torch.Tensor).get("__eq__")) == originals  # no eval: nothing wrapped
    assert g.report() == []


def test_a_top_1_class_against_the_labels_broadcasts_and_is_named():
    # udacity/deep-learning-v2-pytorch#220: top_class from ps.topk(1, dim=1) is (B, 1), the labels (B,)
    def score(out, y):
        ps = torch.exp(torch.log_softmax(out, dim=1))
        top_p, top_class = ps.topk(1, dim=1)
        return (top_class == y).float().sum() / len(y)

    findings, text, acc = _run(score)
    assert slugs(findings) == ["prediction-shape-mismatch"], text
    assert "topk(1, dim=1)" in findings[0].message
    findings, text, acc = _run(lambda out, y: (out.topk(1, dim=1).indices == y.view(-1, 1)).sum())
    assert findings == [], text
    assert acc > 0.7
