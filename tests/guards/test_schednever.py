"""scheduler-cadence, its slowest cadence (issue 33, round eighteen's w401): a per-step schedule (OneCycleLR,
CyclicLR) built and never stepped while its optimizer trains, so the run keeps the rate its constructor set.
Planted bug: a wrapper whose guard on the total steps is inverted (accelerate#690's).  Clean twin: the guard the
right way round.  Silent near the premise: an epoch-counted schedule a short run never reaches the end of an epoch
for, a one-cycle stepped per batch for only part of the run (the rest at its end value on purpose), and a run too
short to judge."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from tests.guards.helpers import batches, guarded_run, mlp, slugs


class Wrapper:
    """Steps the wrapped scheduler after each optimizer step, but not past its total steps."""

    def __init__(self, scheduler, inverted: bool):
        self.scheduler, self.inverted = scheduler, inverted

    def step(self):
        total = self.scheduler.total_steps
        if (total <= self.scheduler.last_epoch) if self.inverted else (self.scheduler.last_epoch < total):
            self.scheduler.step()


def _run(make_sched, steps: int = 60):
    model = mlp(hidden=32)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)

    def train():
        torch.manual_seed(1)
        sched = make_sched(opt)
        for xb, yb in batches(32, steps):
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()

    return guarded_run(train)


def _one_cycle(opt, total: int = 60):
    return torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=1e-2, total_steps=total)


def test_a_one_cycle_never_stepped_is_named_at_its_construction_and_the_twin_is_silent():
    findings, text = _run(lambda opt: Wrapper(_one_cycle(opt), inverted=True))
    assert slugs(findings) == ["scheduler-cadence"], text
    f = findings[0]
    assert "never stepped" in f.message and "0.0004" in f.message
    line = open(__file__).read().splitlines()[int(f.where.rsplit(":", 1)[1]) - 1]
    assert "OneCycleLR(opt" in line
    findings, text = _run(lambda opt: Wrapper(_one_cycle(opt), inverted=False))
    assert slugs(findings) == [], text


class _Never:
    def __init__(self, sched):
        self.sched = sched

    def step(self):
        pass


def test_silent_near_the_premise():
    # an epoch-counted schedule stepped at an epoch's end that this short run never reaches
    assert slugs(_run(lambda opt: _Never(torch.optim.lr_scheduler.StepLR(opt, step_size=10)))[0]) == []
    # a one-cycle of 20 steps stepped through them, then held at its end value (the wrapper stops it)
    assert slugs(_run(lambda opt: Wrapper(_one_cycle(opt, total=20), inverted=False))[0]) == []
    # the second stage of a SequentialLR that this run does not reach (its first stage drives the rate)
    assert slugs(_run(lambda opt: torch.optim.lr_scheduler.SequentialLR(opt, [
        torch.optim.lr_scheduler.LinearLR(opt, start_factor=0.1, total_iters=10), _one_cycle(opt)],
        milestones=[100]))[0]) == []
    # a one-cycle built and left unused while the program sets the rate by hand each step
    class _ByHand(_Never):
        def step(self):
            for g in self.sched.optimizer.param_groups:
                g["lr"] *= 0.99
    assert slugs(_run(lambda opt: _ByHand(_one_cycle(opt)))[0]) == []
    # too few optimizer steps to judge
    assert slugs(_run(lambda opt: _Never(_one_cycle(opt)), steps=12)[0]) == []


def test_a_cyclic_schedule_never_stepped_is_named():
    findings, text = _run(lambda opt: _Never(torch.optim.lr_scheduler.CyclicLR(
        opt, base_lr=1e-4, max_lr=1e-2, step_size_up=10, cycle_momentum=False)))
    assert slugs(findings) == ["scheduler-cadence"], text
