"""autocast-stale-weights (overt/guards/castcache.py, issue 33): a torch.autocast region left open across
optimizer steps serves every later forward the low-precision copies of the weights cast before the step.
One property, several forms, on digits: a bfloat16 region around the whole loop (an MLP with SGD), a
region opened per epoch around the batch loop (a small CNN with Adam: four-dimensional weights), a region
around a ``train_epoch()`` helper; and the programs a correct training loop writes, which stay silent: a
region around the forward and the loss only, a region per iteration that also holds ``backward()`` and
``step()``, a region across steps with ``cache_enabled=False``, and a region across steps whose forwards
run under a nested ``autocast(enabled=False)`` (no weight is ever cast, so nothing is cached)."""

from __future__ import annotations

import contextlib
import pathlib

import torch
from torch import nn
from torch.nn import functional as F

from tests.guards.helpers import digits, guarded_run, slugs

SLUG = "autocast-stale-weights"
HERE = pathlib.Path(__file__)


def _line(marker: str) -> int:
    lines = HERE.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def _bf16(**kw):
    return torch.autocast("cpu", dtype=torch.bfloat16, **kw)


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def _batches(n: int = 1400, bs: int = 200):
    x, y = digits()
    g = torch.Generator().manual_seed(0)
    perm = torch.randperm(n, generator=g)
    for i in range(0, n, bs):
        b = perm[i:i + bs]
        yield x[b], y[b]


def _found(findings) -> list:
    return [f for f in findings if f.slug == SLUG]


def _accuracy(model) -> float:
    x, y = digits()
    with torch.no_grad():
        return (model(x[1400:]).argmax(1) == y[1400:]).float().mean().item()


# -- one region around the whole loop -----------------------------------------------------------------------
def _whole_loop(bug: bool, region=None):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    outer = (region or _bf16)() if bug else contextlib.nullcontext()
    inner = contextlib.nullcontext() if bug else _bf16()
    with outer:  # whole-loop
        for _ in range(2):
            for xb, yb in _batches():
                with inner:
                    loss = F.cross_entropy(model(xb).float(), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()  # whole-loop-step
    return model


def test_region_around_the_whole_loop_is_named_with_its_line():
    findings, text = guarded_run(lambda: _whole_loop(True))
    found = _found(findings)
    assert len(found) == 1, text
    where = found[0].where
    assert f"test_autocast_stale_weights.py:{_line('whole-loop')}" in where, where
    assert where.endswith(f"test_autocast_stale_weights.py:{_line('whole-loop-step')}"), where
    assert "bfloat16" in found[0].message and "0.weight" in found[0].message
    assert "cache_enabled=False" in found[0].fix


def test_region_around_the_forward_only_is_silent():
    findings, text = guarded_run(lambda: _whole_loop(False))
    assert SLUG not in slugs(findings), text


def test_region_across_steps_without_the_cache_is_silent():
    findings, text = guarded_run(lambda: _whole_loop(True, region=lambda: _bf16(cache_enabled=False)))
    assert SLUG not in slugs(findings), text


# -- a region per epoch, convolution weights, Adam ------------------------------------------------------------
class _Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.conv = nn.Conv2d(1, 8, 3, padding=1)
        self.head = nn.Linear(8 * 16, 10)

    def forward(self, x):
        h = F.max_pool2d(F.relu(self.conv(x.view(-1, 1, 8, 8))), 2)
        return self.head(h.flatten(1))


def _per_epoch(bug: bool):
    model = _Cnn()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(2):
        with _bf16() if bug else contextlib.nullcontext():  # per-epoch
            for xb, yb in _batches():
                with contextlib.nullcontext() if bug else _bf16():
                    out = model(xb)
                loss = F.cross_entropy(out.float(), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()


def test_region_per_epoch_over_a_cnn_is_named():
    findings, text = guarded_run(lambda: _per_epoch(True))
    found = _found(findings)
    assert len(found) == 1, text
    assert f"test_autocast_stale_weights.py:{_line('per-epoch')}" in found[0].where


def test_region_per_forward_over_a_cnn_is_silent():
    findings, text = guarded_run(lambda: _per_epoch(False))
    assert SLUG not in slugs(findings), text


# -- a region around a train_epoch() helper -------------------------------------------------------------------
def _train_epoch(model, opt):
    for xb, yb in _batches():
        opt.zero_grad()
        F.cross_entropy(model(xb).float(), yb).backward()
        opt.step()


def _helper(bug: bool):
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        if bug:
            with _bf16():
                _train_epoch(model, opt)
        else:
            _train_epoch(model, opt)


def test_region_around_a_train_epoch_helper_is_named():
    findings, text = guarded_run(lambda: _helper(True))
    assert len(_found(findings)) == 1, text


def test_float32_training_is_silent():
    findings, text = guarded_run(lambda: _helper(False))
    assert SLUG not in slugs(findings), text


# -- correct programs that step inside a region -----------------------------------------------------------------
def _region_per_iteration():
    model = _mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for _ in range(2):
        for xb, yb in _batches():
            with _bf16():
                loss = F.cross_entropy(model(xb).float(), yb)
                opt.zero_grad()
                loss.backward()
                opt.step()
    return model


def test_region_per_iteration_holding_the_step_is_silent_and_trains():
    box = {}
    findings, text = guarded_run(lambda: box.setdefault("m", _region_per_iteration()))
    assert SLUG not in slugs(findings), text
    assert _accuracy(box["m"]) == _accuracy(_region_per_iteration())  # the guard's casts changed nothing


def test_region_across_steps_whose_forwards_cast_nothing_is_silent():
    def run(box):
        model = _mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        with _bf16():
            for _ in range(2):
                for xb, yb in _batches():
                    with torch.autocast("cpu", enabled=False):
                        loss = F.cross_entropy(model(xb), yb)
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
        box["m"] = model

    box, plain = {}, {}
    findings, text = guarded_run(lambda: run(box))
    assert SLUG not in slugs(findings), text
    run(plain)
    assert _accuracy(box["m"]) == _accuracy(plain["m"])  # the guard's casts changed nothing
