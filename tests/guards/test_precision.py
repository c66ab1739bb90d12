"""Precision of the training step: float16 autocast without a GradScaler (``fp16-without-scaler``)
and updates rounded away in low-precision parameters (``params-not-updating``)."""

from __future__ import annotations

import torch
from torch import nn

from .helpers import batches, guarded, mlp, slugs


def _amp_loop(dtype, scaler=None, steps: int = 6, weight: float = 1.0):
    model = mlp()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    g = guarded(model, opt, check_every=1)
    loss_fn = nn.CrossEntropyLoss()
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        with torch.amp.autocast(device_type="cpu", dtype=dtype):
            out = model(xb)
        loss = weight * loss_fn(out.float(), yb)
        if scaler is None:
            loss.backward()
            opt.step()
        else:
            scaler.scale(loss).backward()
            scaler.step(opt)
            scaler.update()
    return g.report()


def test_fp16_autocast_without_scaler():
    findings = _amp_loop(torch.float16, weight=1e-4)
    assert slugs(findings) == ["fp16-without-scaler"]
    assert "test_precision.py" in findings[0].where and "autocast at" in findings[0].where
    assert "GradScaler" in findings[0].fix


def test_fp16_autocast_with_a_disabled_scaler():
    findings = _amp_loop(torch.float16, scaler=torch.amp.GradScaler("cpu", enabled=False))
    assert slugs(findings) == ["fp16-without-scaler"]
    assert "enabled=False" in findings[0].message


def test_fp16_autocast_with_scaler_and_bf16_autocast_are_quiet():
    assert _amp_loop(torch.float16, scaler=torch.amp.GradScaler("cpu"), weight=1e-4) == []
    assert _amp_loop(torch.bfloat16, weight=1e-4) == []


def _low_precision_loop(cast, make_opt, steps: int = 8, autocast: bool = False):
    model = cast(mlp(hidden=64))
    opt = make_opt(model.parameters())
    g = guarded(model, opt, check_every=1)
    dtype = next(model.parameters()).dtype
    loss_fn = nn.CrossEntropyLoss()
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = model(xb.to(dtype))
        loss_fn(out.float(), yb).backward()
        opt.step()
    return g.report()


def test_bf16_parameters_lose_their_updates():
    findings = _low_precision_loop(lambda m: m.bfloat16(), lambda p: torch.optim.SGD(p, lr=0.01))
    assert slugs(findings) == ["params-not-updating"]
    assert "bfloat16" in findings[0].message and "round" in findings[0].message
    assert "autocast" in findings[0].fix


def test_bf16_parameters_whose_updates_survive_and_fp32_with_autocast_are_quiet():
    assert _low_precision_loop(lambda m: m.bfloat16(), lambda p: torch.optim.Adam(p, lr=1e-2)) == []
    assert _low_precision_loop(lambda m: m, lambda p: torch.optim.SGD(p, lr=0.01), autocast=True) == []


def _half_adam(eps: float, steps: int = 4):
    model = mlp(hidden=64).half()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3, eps=eps)
    g = guarded(model, opt, check_every=1)
    for xb, yb in batches(32, steps):
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb.half()).float(), yb).backward()
        opt.step()
    return g, model


def test_adam_eps_that_float16_cannot_hold():
    g, _ = _half_adam(1e-8, steps=1)  # one step: the run is not stopped by the NaN loss that follows
    findings = g.report()
    assert slugs(findings) == ["optimizer-eps-underflow"]
    assert "eps=1e-08" in findings[0].message and "float16" in findings[0].message


def test_adam_eps_that_float16_holds_is_quiet():
    g, model = _half_adam(1e-4)
    assert all(bool(p.isfinite().all()) for p in model.parameters())
    assert "optimizer-eps-underflow" not in slugs(g.report())
