"""train/eval/no_grad modes: planted bugs reported; clean twins quiet."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from .helpers import batches, guarded, mlp, slugs, train, val_batches


def _validate(model, *, call_eval: bool, no_grad: bool):
    if call_eval:
        model.eval()
    correct = 0
    ctx = torch.no_grad() if no_grad else torch.enable_grad()
    with ctx:
        for xb, yb in val_batches():
            correct += int((model(xb).argmax(1) == yb).sum())
    return correct


def test_train_mode_in_eval():
    model = mlp(dropout=0.3, bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    _validate(model, call_eval=False, no_grad=True)  # forgot model.eval()
    findings = g.report()
    assert slugs(findings) == ["train-mode-in-eval"]
    f = findings[0]
    assert "Sequential.1 (BatchNorm1d)" in f.message and "Sequential.3 (Dropout)" in f.message
    assert "test_modes.py" in f.where


def _mc_dropout(model, layers) -> None:
    """Monte Carlo dropout: model.eval(), then the given layers back in training mode, 5 passes under no_grad."""
    model.eval()
    for m in model.modules():
        if isinstance(m, layers):
            m.train()
    with torch.no_grad():
        for xb, _ in val_batches():
            torch.stack([model(xb).softmax(1) for _ in range(5)]).var(0)


def test_monte_carlo_dropout_after_eval_is_deliberate_but_batchnorm_switched_back_is_not():
    """Dropout layers switched on by hand after model.eval() are MC dropout's samples (round six's w166 twin was
    reported); a BatchNorm switched on that way still normalises with, and updates, batch statistics."""
    both = (torch.nn.Dropout, torch.nn.BatchNorm1d)
    for layers, expected in ((torch.nn.Dropout, []), (both, ["train-mode-in-eval"])):
        model = mlp(dropout=0.3, bn=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt)
        train(model, opt, steps=6)
        _mc_dropout(model, layers)
        assert slugs(g.report()) == expected, layers


def _mc_dropout_in_train_mode(model, passes: int, per_batch: bool) -> None:
    """BALD-style Monte Carlo dropout: model.train() under no_grad, each evaluation batch passed ``passes`` times
    (all batches once per pass, or each batch ``passes`` times in a row)."""
    model.train()
    with torch.no_grad():
        if per_batch:
            for xb, _ in val_batches():
                torch.stack([model(xb).softmax(1) for _ in range(passes)]).mean(0)
        else:
            for _ in range(passes):
                for xb, _ in val_batches():
                    model(xb).softmax(1)


def test_monte_carlo_dropout_in_train_mode_is_sampling_but_a_single_pass_is_an_evaluation():
    """A model of Dropout layers only, run in training mode under no_grad: several passes over the same inputs
    sample the dropout masks (deep-active-learning's BALD, a false finding in session 52's public scripts); one
    pass over distinct batches is an evaluation that forgot model.eval(), reported at the phase's end.  With a
    BatchNorm in training mode the repeated passes still move its running statistics: reported."""
    cases = (({"dropout": 0.3}, 5, False, []), ({"dropout": 0.3}, 5, True, []),
             ({"dropout": 0.3}, 1, False, ["train-mode-in-eval"]),
             ({"dropout": 0.3, "bn": True}, 5, False, ["train-mode-in-eval"]))
    for kwargs, passes, per_batch, expected in cases:
        model = mlp(**kwargs)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        g = guarded(model, opt)
        for _ in range(2):
            train(model, opt, steps=6)
            _mc_dropout_in_train_mode(model, passes, per_batch)
        findings = g.report()
        assert slugs(findings) == expected, (kwargs, passes, per_batch, findings)
        if expected:
            assert "test_modes.py" in findings[0].where


def test_eval_with_eval_call_is_quiet():
    model = mlp(dropout=0.3, bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    for _ in range(2):
        train(model, opt, steps=6)
        _validate(model, call_eval=True, no_grad=True)
        model.train()
    assert g.report() == []


def test_eval_mode_in_train():
    model = mlp(dropout=0.3, bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    for epoch in range(2):
        model.train() if epoch == 0 else None  # bug: train() only before the first epoch
        for xb, yb in batches(32, 5):
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
        _validate(model, call_eval=True, no_grad=True)
    findings = g.report()
    assert slugs(findings) == ["eval-mode-in-train"]
    assert "Dropout" in findings[0].message and "test_modes.py" in findings[0].where


def test_graph_in_eval():
    model = mlp(dropout=0.3)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    _validate(model, call_eval=True, no_grad=False)  # forgot torch.no_grad()
    findings = g.report()
    assert slugs(findings) == ["graph-in-eval"]
    assert "test_modes.py" in findings[0].where


def test_graph_in_eval_single_batch_at_the_end_is_reported():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    model.eval()
    x, _ = next(val_batches())
    model(x).argmax(1)
    assert slugs(g.report()) == ["graph-in-eval"]


def test_inference_mode_eval_is_quiet():
    model = mlp(dropout=0.3, bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    model.eval()
    with torch.inference_mode():
        for xb, _ in val_batches():
            model(xb)
    model.train()
    train(model, opt, steps=3)
    assert g.report() == []


def test_model_without_dropout_or_bn_evaluated_without_eval_is_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt)
    train(model, opt, steps=6)
    _validate(model, call_eval=False, no_grad=True)
    train(model, opt, steps=3)
    assert g.report() == []


def test_mode_bugs_are_seen_between_checked_steps():
    """With the default cadence the forward hook is off between checked steps; entering
    no_grad, calling eval()/train() or starting a DataLoader pass re-arms it."""
    import io

    from torch.utils.data import DataLoader, TensorDataset

    import overt

    from .helpers import digits

    x, y = digits()
    val = DataLoader(TensorDataset(x[1500:], y[1500:]), batch_size=64)
    for bug in ("no-eval", "no-no-grad", "no-train"):
        model = mlp(dropout=0.3, bn=True)
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        g = overt.guard(model, opt, stream=io.StringIO())
        for epoch in range(2):
            if bug != "no-train" or epoch == 0:
                model.train()
            for xb, yb in batches(32, 37, start=epoch * 37):  # steps 5..73: no checked step at the eval
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
            if bug != "no-eval":
                model.eval()
            with torch.no_grad() if bug != "no-no-grad" else torch.enable_grad():
                for xb, _ in val:
                    model(xb)
        expected = {"no-eval": "train-mode-in-eval", "no-no-grad": "graph-in-eval",
                    "no-train": "eval-mode-in-train"}[bug]
        found = slugs(g.report())
        assert expected in found, bug
        # consequences may follow (BatchNorm in eval mode with early running statistics
        # can blow up the gradients), but nothing unrelated
        assert set(found) <= {expected, "exploding-gradients"}, (bug, found)
