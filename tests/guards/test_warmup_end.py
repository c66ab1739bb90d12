"""warmup-outlasts-run (issue 33, the wild corpus's w388): a LambdaLR warm-up that lasts the whole run.  Planted on
digits: a hand-written linear warm-up-and-decay schedule called with the warm-up and total step counts swapped
(BERT_multimodal_transformer#22), under ``overt.guard`` and under a session that finds everything itself; its twin
(the counts in their places).  Silent: a warm-up to a constant rate, an inverse-square-root warm-up that ends
within the run, a decaying schedule, a learning-rate range test followed by training with a new schedule on the
same optimizer, a LambdaLR warm-up piece of a SequentialLR."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded, guarded_run, slugs

SLUG = "warmup-outlasts-run"
STEPS = 200


def linear_schedule_with_warmup(opt, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))
    return torch.optim.lr_scheduler.LambdaLR(opt, lr_lambda)


def _run(model, opt, sched, steps=STEPS):
    x, y = digits()
    g = torch.Generator().manual_seed(0)
    for _ in range(steps):
        i = torch.randint(0, 1300, (32,), generator=g)
        loss = F.cross_entropy(model(x[i]), y[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()


def _mlp():
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def test_warmup_and_total_swapped_is_named_and_the_twin_is_silent():
    for warmup, total, expect in ((STEPS, STEPS // 10, True), (STEPS // 10, STEPS, False)):
        model = _mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        sched = linear_schedule_with_warmup(opt, warmup, total)
        with guarded(model, opt) as g:
            _run(model, opt, sched)
        found = [f for f in g.findings if f.slug == SLUG]
        assert bool(found) is expect, slugs(g.findings)
        if expect:
            assert "rose at every point of the 200 steps" in found[0].message
            assert "num_warmup_steps=int(0.1 * total)" in found[0].fix


def test_a_session_that_finds_the_scheduler_itself_names_it():
    model = _mlp()

    def train():
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        _run(model, opt, linear_schedule_with_warmup(opt, 4 * STEPS, STEPS))  # a warm-up in samples, say

    findings, _ = guarded_run(train)
    assert SLUG in slugs(findings)


def test_warmups_that_end_within_the_run_and_decays_are_silent():
    schedules = (
        lambda s: min(1.0, (s + 1) / 20),                                   # warm-up to a constant
        lambda s: min((s + 1) / 30, (30 / (s + 1)) ** 0.5),                 # inverse square root (Noam)
        lambda s: 0.99 ** s,                                               # exponential decay
        lambda s: 1.0,                                                     # constant
    )
    for fn in schedules:
        model = _mlp()

        def train(fn=fn, model=model):
            opt = torch.optim.SGD(model.parameters(), lr=0.05)
            _run(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, fn))

        findings, _ = guarded_run(train)
        assert SLUG not in slugs(findings)


def test_a_range_test_then_training_and_a_sequential_warmup_piece_are_silent():
    model = _mlp()

    def train():
        opt = torch.optim.SGD(model.parameters(), lr=1e-4)
        finder = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 10 ** (4 * s / 50))  # rises over its 50 steps
        _run(model, opt, finder, steps=50)
        for group in opt.param_groups:
            group["lr"] = group["initial_lr"] = 0.05
        _run(model, opt, torch.optim.lr_scheduler.LambdaLR(opt, lambda s: 1 - s / (2 * STEPS)))

    findings, _ = guarded_run(train)
    assert SLUG not in slugs(findings)

    model = _mlp()

    def sequential():
        opt = torch.optim.SGD(model.parameters(), lr=0.05)
        warm = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: (s + 1) / 40)  # cut at its milestone by design
        cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=STEPS - 40)
        _run(model, opt, torch.optim.lr_scheduler.SequentialLR(opt, [warm, cos], milestones=[40]))

    findings, _ = guarded_run(sequential)
    assert SLUG not in slugs(findings)
