"""Data pipeline guards and the learning-rate scheduler's cadence."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, Dataset, TensorDataset

from tests.conftest import TIMING

from .helpers import digits, guarded, mlp, slugs


class _SlowDigits(Dataset):
    """A __getitem__ that does heavy work per sample."""

    def __init__(self, delay: float):
        self.x, self.y = digits()
        self.delay = delay

    def __len__(self) -> int:
        return 1500

    def __getitem__(self, i):
        if self.delay:
            time.sleep(self.delay)
        return self.x[i], self.y[i]


def _epoch(loader, model, opt, max_batches=None):
    model.train()
    for i, (xb, yb) in enumerate(loader):
        if max_batches is not None and i >= max_batches:
            break
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()


def test_dataloader_starvation():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(_SlowDigits(delay=0.002), batch_size=8, shuffle=True)
    g = guarded(model, opt, check_every=10)
    _epoch(loader, model, opt, max_batches=30)
    findings = g.report()
    assert slugs(findings) == ["dataloader-starvation"]
    assert "num_workers=0" in findings[0].message


_BURN = "import time\nend = time.time() + 60\nwhile time.time() < end:\n    pass\n"


@pytest.fixture
def two_cpu_burners():
    """Two processes that spin on a CPU each (they stop by themselves after a minute)."""
    procs = [subprocess.Popen([sys.executable, "-c", _BURN]) for _ in range(2)]
    try:
        yield
    finally:
        for p in procs:
            p.kill()
            p.wait(timeout=30)


def test_dataloader_starvation_on_a_busy_machine(two_cpu_burners):
    # the planted loader sleeps: time waiting for a CPU is left out of its wait, the sleep is not
    test_dataloader_starvation()


def test_a_wait_for_the_cpu_is_the_machine_not_the_loader(monkeypatch):
    # as on an oversubscribed machine: the thread waited for a CPU for all of the time that passed
    # (run_queue_wait reads /proc/thread-self/schedstat; here it follows the clock)
    from overt.guards import data

    monkeypatch.setattr(data, "run_queue_wait", time.perf_counter)
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    loader = DataLoader(_SlowDigits(delay=0.002), batch_size=8, shuffle=True)
    g = guarded(model, opt, check_every=10)
    _epoch(loader, model, opt, max_batches=30)
    assert g.report() == []
    notes = g.session.reporter.notes
    assert len(notes) == 1 and notes[0].startswith("this machine is busy")
    assert "waiting for a CPU that other processes held" in notes[0]


def test_without_schedstat_the_wait_is_judged_as_measured(monkeypatch):
    from overt.guards import data

    monkeypatch.setattr(data, "run_queue_wait", lambda: None)  # macOS, Windows: the system does not say
    test_dataloader_starvation()


def test_fast_loader_is_quiet():
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:1500], y[:1500]), batch_size=8, shuffle=True)
    g = guarded(model, opt, check_every=10)
    _epoch(loader, model, opt, max_batches=30)
    assert g.report() == []


def test_batchnorm_tiny_last_batch():
    model = mlp(bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:1442], y[:1442]), batch_size=32, shuffle=True)  # last batch: 2
    g = guarded(model, opt)
    _epoch(loader, model, opt)
    findings = g.report()
    assert slugs(findings) == ["batchnorm-tiny-batch"]
    assert "batch of 2" in findings[0].message and "batch 45" in findings[0].where
    assert "drop_last=True" in findings[0].message


def test_batchnorm_with_drop_last_is_quiet():
    model = mlp(bn=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:1442], y[:1442]), batch_size=32, shuffle=True, drop_last=True)
    g = guarded(model, opt)
    _epoch(loader, model, opt)
    assert g.report() == []


def _sched_run(kind: str, per_batch: bool, epochs: int = 2):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=32, shuffle=True)
    if kind == "step":
        sched = torch.optim.lr_scheduler.StepLR(opt, step_size=3, gamma=0.5)  # every 3 epochs
    else:
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=0.1, total_steps=epochs * len(loader))
    g = guarded(model, opt, check_every=5, ignore=TIMING)  # a busy machine starves the loader
    for _ in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()
            if per_batch:
                sched.step()
        if not per_batch:
            sched.step()
    return g.report()


def test_epoch_scheduler_stepped_every_batch():
    findings = _sched_run("step", per_batch=True)
    assert slugs(findings) == ["scheduler-cadence"]
    assert "StepLR" in findings[0].where


def test_one_cycle_stepped_every_epoch():
    findings = _sched_run("onecycle", per_batch=False, epochs=3)
    assert slugs(findings) == ["scheduler-cadence"]
    assert "OneCycleLR" in findings[0].where


def test_schedulers_at_their_cadence_are_quiet():
    assert _sched_run("step", per_batch=False, epochs=3) == []
    assert _sched_run("onecycle", per_batch=True, epochs=3) == []


def _decay_run(every_step: bool, freeze_at: int | None = None, epochs: int = 3):
    """Two parameter groups; the lower layer's learning rate multiplied by 0.3 (a layer-wise decay)
    once, or (the bug) at every step; ``freeze_at``: its learning rate set to 0 from that epoch on."""
    torch.manual_seed(0)
    model = mlp()
    layers = [m for m in model if isinstance(m, torch.nn.Linear)]
    opt = torch.optim.SGD([{"params": layers[0].parameters(), "scale": 0.3},
                           {"params": [p for m in layers[1:] for p in m.parameters()], "scale": 1.0}], lr=0.1)
    if not every_step:
        for group in opt.param_groups:
            group["lr"] *= group["scale"]
    x, y = digits()
    loader = DataLoader(TensorDataset(x[:640], y[:640]), batch_size=32, shuffle=True)
    g = guarded(model, opt, check_every=5, ignore=TIMING)
    for epoch in range(epochs):
        if freeze_at is not None and epoch >= freeze_at:
            opt.param_groups[0]["lr"] = 0.0
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            if every_step:
                for group in opt.param_groups:
                    group["lr"] *= group["scale"]
            opt.step()
    return g.report()


def test_a_hand_written_decay_applied_every_step_is_named():
    findings = _decay_run(every_step=True)
    assert slugs(findings) == ["scheduler-cadence"]
    assert "param_groups[0]" in findings[0].where


def test_a_decay_applied_once_or_a_frozen_group_is_quiet():
    assert _decay_run(every_step=False) == []
    assert _decay_run(every_step=False, freeze_at=1) == []
