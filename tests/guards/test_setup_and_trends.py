"""Guards on the run's setup and on the epochs' results, inside overt's engine, and the model
scans: val-loss-diverging, val-metric-collapse, batchnorm-in-accumulation, effective-batch-size,
unregistered-tensor, too-many-workers.  Each planted, each with a clean twin."""

from __future__ import annotations

import io
import os

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

import overt
from overt.config import config_class
from overt.engine.callbacks import Callback
from overt.guards.engine import GuardCallback
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from overt.guards.trends import EpochTrends

from .helpers import digits


def _slugs(summary):
    return [f["slug"] for f in summary["findings"]]


def _data(n_train=480):
    x, y = digits()
    return TensorDataset(x[:n_train], y[:n_train]), TensorDataset(x[1500:1700], y[1500:1700])


def _fit(model, n_train=480, callbacks=(), config=None, lr=0.1, optimizer=None, **overrides):
    train, val = _data(n_train)
    opt = optimizer or torch.optim.SGD(model.parameters(), lr=lr)
    guard = GuardCallback(check_every=2)
    settings = {} if config is not None else dict(epochs=2, batch_size=32, progress="off")
    return overt.Trainer(model, opt, nn.CrossEntropyLoss(), train, val, callbacks=[guard, *callbacks], config=config,
                         metrics={"accuracy": overt.metrics.accuracy}, **{**settings, **overrides}).fit()


def _mlp(bn=False, hidden=32):
    torch.manual_seed(0)
    layers = [nn.Linear(64, hidden), *([nn.BatchNorm1d(hidden)] if bn else []), nn.ReLU(), nn.Linear(hidden, 10)]
    return nn.Sequential(*layers)


# -- validation trends -------------------------------------------------------------------------

def _trends(history, lrs=None, **kw):
    session = GuardSession(GuardOptions())
    trends = EpochTrends(session, monitor=kw.pop("monitor", "val/loss"), monitor_mode=kw.pop("mode", "min"), **kw)
    for epoch, metrics in enumerate(history):
        trends.epoch_end(epoch, metrics, lr=None if lrs is None else lrs[epoch])
    return [f.slug for f in session.close()]


def _curve(val, train=None):
    train = train or [1.0 - 0.05 * i for i in range(len(val))]
    return [{"train/epoch_loss": t, "val/loss": v} for t, v in zip(train, val)]


# the sentiment recipe's real validation losses (seed 0): a steady climb after epoch 5
CLIMB = [0.626, 0.53, 0.478, 0.455, 0.447, 0.456, 0.467, 0.481, 0.498, 0.52, 0.552, 0.573]


def test_a_sustained_climb_while_train_falls_is_overfitting():
    assert _trends(_curve(CLIMB)) == ["val-loss-diverging"]
    assert _trends(_curve(CLIMB[:8])) == []  # three small rises: not yet beyond noise
    rising_train = [0.5 + 0.01 * i for i in range(len(CLIMB))]
    assert _trends(_curve(CLIMB, rising_train)) == []  # training loss rising too: loss-not-decreasing's job


def test_wiggles_and_rises_that_fall_again_are_quiet():
    # a fresh `overt init` project's 3% wiggle at the end of training
    assert _trends(_curve([0.5, 0.3, 0.2, 0.15, 0.12, 0.11, 0.105, 0.103, 0.104, 0.105, 0.1064])) == []
    # a noisy plateau (the house-prices recipe, seed 1): its lowest validation was luck
    plateau = [0.0729, 0.0212, 0.0172, 0.0171, 0.0156, 0.0157, 0.0163, 0.017, 0.0158, 0.0157, 0.0169, 0.0163,
               0.0181, 0.0156, 0.0166, 0.0166, 0.02, 0.0171, 0.0189, 0.0159, 0.0162, 0.0161, 0.0172, 0.018]
    assert _trends(_curve(plateau)) == []
    # a rise while the learning rate warms up (OneCycleLR), then the fall it was leading to
    warm = [0.3, 0.2, 0.18, 0.2, 0.23, 0.26, 0.3, 0.25, 0.15, 0.1, 0.07, 0.055]
    lrs = [0.001, 0.003, 0.006, 0.01, 0.02, 0.03, 0.04, 0.03, 0.02, 0.01, 0.005, 0.001]
    assert _trends(_curve(warm), lrs=lrs) == []


def test_val_accuracy_collapsing_below_half_its_best_and_a_dip_that_is_not():
    acc = lambda *v: [{"val/accuracy": a, "val/loss": 1.0} for a in v]  # noqa: E731
    assert _trends(acc(0.5, 0.9, 0.92, 0.3)) == ["val-metric-collapse"]
    assert _trends(acc(0.5, 0.9, 0.92, 0.8, 0.93)) == []
    assert _trends([{"val/f1": 0.9}, {"val/f1": 0.2}], monitor="val/f1", mode="max") == ["val-metric-collapse"]


def test_an_overfitting_run_is_reported_at_epoch_end_and_a_healthy_one_is_quiet():
    torch.manual_seed(0)
    big = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    overfit = _fit(big, n_train=24, epochs=16, batch_size=24, optimizer=torch.optim.Adam(big.parameters(), lr=3e-2))
    assert "val-loss-diverging" in _slugs(overfit)
    healthy = _fit(_mlp(), epochs=4)
    assert not {"val-loss-diverging", "val-metric-collapse"} & set(_slugs(healthy))


class Blowup(Callback):
    """A learning rate that jumps after epoch 2 (the planted destabilisation)."""

    def on_epoch_end(self, trainer, epoch, metrics):
        if epoch == 2:
            for group in trainer.optimizer.param_groups:
                group["lr"] = 60.0


def test_a_collapsed_validation_accuracy_is_reported_in_a_real_run():
    summary = _fit(_mlp(), callbacks=[Blowup()], epochs=5, ignore=["exploding-gradients", "non-finite"])
    assert "val-metric-collapse" in _slugs(summary), summary["final"]


# -- setup ------------------------------------------------------------------------------------------

def test_batchnorm_with_accumulation_warns_and_layernorm_or_no_accumulation_is_quiet():
    assert "batchnorm-in-accumulation" in _slugs(_fit(_mlp(bn=True), accumulate=4, batch_size=8, epochs=1))
    assert "batchnorm-in-accumulation" not in _slugs(_fit(_mlp(bn=True), epochs=1))
    torch.manual_seed(0)
    layernorm = nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.ReLU(), nn.Linear(32, 10))
    assert "batchnorm-in-accumulation" not in _slugs(_fit(layernorm, accumulate=4, batch_size=8, epochs=1))


def test_effective_batch_size_changed_with_the_recipes_lr_unchanged_is_an_info():
    # a recipe tuned lr=0.1 for batches of 32 (its defaults), as `overt train` builds its config
    cls = config_class({"lr": 0.1, "batch_size": 32, "epochs": 1, "progress": "off"})
    changed = _fit(_mlp(), config=cls(accumulate=2))
    finding = next(f for f in changed["findings"] if f["slug"] == "effective-batch-size")
    assert finding["severity"] == "info" and "64 samples" in finding["message"] and "lr=0.2" in finding["message"]
    assert "effective-batch-size" not in _slugs(_fit(_mlp(), config=cls(accumulate=2, lr=0.2)))
    assert "effective-batch-size" not in _slugs(_fit(_mlp(), config=cls()))


# -- modules and workers ----------------------------------------------------------------------------

class Scaled(nn.Module):
    def __init__(self, buffer: bool):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(64, 10)
        scale = torch.full((10,), 0.5)
        if buffer:
            self.register_buffer("scale", scale)
        else:
            self.scale = scale  # planted: a plain tensor attribute

    def forward(self, x):
        return self.body(x) * self.scale


def test_a_plain_tensor_attribute_is_reported_and_a_buffer_is_not():
    summary = _fit(Scaled(buffer=False), epochs=1)
    finding = next(f for f in summary["findings"] if f["slug"] == "unregistered-tensor")
    assert "Scaled.scale" in finding["where"] and "register_buffer('scale'" in finding["message"]
    assert "unregistered-tensor" not in _slugs(_fit(Scaled(buffer=True), epochs=1))


class Tally(nn.Module):
    """A running sum kept as a plain tensor attribute (the buggy twin: ``.to(device)`` leaves it)."""

    def __init__(self):
        super().__init__()
        self.total = torch.zeros(())

    def forward(self, out):
        self.total = self.total + out.detach().abs().mean()
        return out


class MovedTally(Tally):
    """The same sum moved by the module itself in ``_apply`` (as torchmetrics' ``Metric`` moves its
    states): ``.to(device)`` moves it."""

    def _apply(self, fn, *args, **kwargs):
        self.total = fn(self.total)
        return super()._apply(fn, *args, **kwargs)


class Tallied(nn.Module):
    def __init__(self, tally: nn.Module):
        super().__init__()
        torch.manual_seed(0)
        self.body = nn.Linear(64, 10)
        self.tally = tally

    def forward(self, x):
        return self.tally(self.body(x))


def test_a_tensor_attribute_of_a_module_that_moves_it_in_apply_is_not_unregistered_tensor():
    # pytorch-forecasting's N-BEATS (fresh2, session 47): torchmetrics states (`losses`, `lengths`)
    # are plain attributes that Metric._apply moves; "model.to(device) leaves it" was not known
    assert Tallied(MovedTally()).to(torch.float64).tally.total.dtype == torch.float64  # _apply moves it
    assert "unregistered-tensor" not in _slugs(_fit(Tallied(MovedTally()), epochs=1))
    summary = _fit(Tallied(Tally()), epochs=1)  # the buggy twin: nn.Module's _apply leaves it
    finding = next(f for f in summary["findings"] if f["slug"] == "unregistered-tensor")
    assert "tally.total" in finding["where"]


class Mixed(nn.Module):
    """A learned lower-triangular mix of the features: ``L * mask + I``.  ``mask`` and ``eye`` follow from
    the width alone; ``draft`` is read only here, to start L from.  Nothing moves the constants (the twin)."""

    def __init__(self, n: int):
        super().__init__()
        self.draft = torch.randn(n, n)
        self.L = nn.Parameter(torch.tril(self.draft, -1) * 0.01)
        self.mask = torch.tril(torch.ones(n, n), -1)
        self.eye = torch.eye(n)

    def forward(self, x):
        return x @ (self.L * self.mask + self.eye)


class RehomedMixed(nn.Module):
    """Mixed whose forward moves its constants to the weight's device first (as flow layers do)."""

    def __init__(self, n: int):
        super().__init__()
        self.draft = torch.randn(n, n)
        self.L = nn.Parameter(torch.tril(self.draft, -1) * 0.01)
        self.mask = torch.tril(torch.ones(n, n), -1)
        self.eye = self.mask.t().clone() * 0 + torch.eye(n)

    def forward(self, x):
        if self.mask.device != self.L.device:
            self.mask = self.mask.to(self.L.device)
            self.eye = self.eye.to(self.L.device)
        return x @ (self.L * self.mask + self.eye)


class PermutedMixed(nn.Module):
    """RehomedMixed plus a random permutation it moves the same way: a checkpoint must hold that one."""

    def __init__(self, n: int):
        super().__init__()
        self.L = nn.Parameter(torch.zeros(n, n))
        self.mask = torch.tril(torch.ones(n, n), -1)
        self.perm = torch.randperm(n)

    def forward(self, x):
        if self.mask.device != self.L.device:
            self.mask = self.mask.to(self.L.device)
            self.perm = self.perm.to(self.L.device)
        return (x + x @ (self.L * self.mask))[:, self.perm]


class MixedNet(nn.Module):
    def __init__(self, mix: nn.Module):
        super().__init__()
        torch.manual_seed(0)
        self.mix = mix
        self.body = nn.Linear(64, 10)

    def forward(self, x):
        return self.body(self.mix(x))


def _unregistered(summary):
    return sorted(f["where"].split(" (")[0].rsplit(".", 1)[-1] for f in summary["findings"]
                  if f["slug"] == "unregistered-tensor")


def test_shape_only_constants_a_module_moves_itself_and_a_build_time_tensor_are_not_unregistered_tensor():
    # pytorch-flows' LUInvertibleMM (fresh3-dev, session 48): L_mask, U_mask and I are rebuilt identically by
    # every construction and moved to L's device at the top of forward; W is read only in __init__
    assert _unregistered(_fit(MixedNet(RehomedMixed(64)), epochs=1)) == []
    # the buggy twins: the same constants that nothing moves, and a random permutation however it is moved
    assert _unregistered(_fit(MixedNet(Mixed(64)), epochs=1)) == ["eye", "mask"]
    assert _unregistered(_fit(MixedNet(PermutedMixed(64)), epochs=1)) == ["perm"]


class Drafted(nn.Module):
    """``draft`` read in forward as well as in __init__ (the twin of Mixed's build-time tensor)."""

    def __init__(self):
        super().__init__()
        self.draft = torch.randn(64)
        self.w = nn.Parameter(self.draft.clone())

    def forward(self, x):
        return x * self.w + self.draft


def test_a_tensor_read_after_construction_is_still_unregistered_tensor():
    assert _unregistered(_fit(MixedNet(Drafted()), epochs=1)) == ["draft"]


def test_more_workers_than_cpus_is_reported_in_a_hand_written_loop():
    cpus = len(os.sched_getaffinity(0))
    x, y = digits()
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    found = {}
    for workers in (cpus + 1, min(cpus, 2)):
        guard = overt.guard(model, opt, stream=io.StringIO())
        loader = DataLoader(TensorDataset(x[:64], y[:64]), batch_size=32, num_workers=workers)
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
        found[workers] = [f.slug for f in guard.report()]
    assert "too-many-workers" in found[cpus + 1]
    assert "too-many-workers" not in found[min(cpus, 2)]
