"""eval-copy-near-initial (overt/guards/evalcopy.py, issue 33), its resumed form: an average taken from the
model *before* a checkpoint was loaded into it (BangLiu/QANet-PyTorch#4) starts from the weights the load threw
away and, with a decay near 1, is evaluated near them.  Named at the load's line, for a hand-written EMA class
and for a copy lerped over its state_dict, with clean twins (the average created after the load).  Quiet: a
warmed EMA evaluated after the best weights are restored into the trained model, and torch's ``AveragedModel``
created before the load (its first update copies the model).  Small real runs on digits, found as
``overt run`` finds models."""

from __future__ import annotations

import copy
import io
import pathlib

import torch
from torch import nn
from torch.nn import functional as F
from torch.optim import swa_utils

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, mlp, slugs

SLUG = "eval-copy-near-initial"
HERE = pathlib.Path(__file__)


def _line(marker: str) -> int:
    lines = HERE.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


class _Ema:
    """A model EMA in the common hand-written form: a copy of the model in eval mode."""

    def __init__(self, model: nn.Module, decay: float) -> None:
        self.module = copy.deepcopy(model).eval()
        self.decay = decay

    def update(self, model: nn.Module) -> None:
        with torch.no_grad():
            for e, m in zip(self.module.parameters(), model.parameters()):
                e.mul_(self.decay).add_(m.detach(), alpha=1 - self.decay)


def _epoch(model, opt, x, y, after_step, steps: int = 22):
    g = torch.Generator().manual_seed(1)
    model.train()
    for _ in range(steps):
        idx = torch.randint(0, 1400, (64,), generator=g)
        opt.zero_grad()
        F.cross_entropy(model(x[idx]), y[idx]).backward()
        opt.step()
        after_step()


def _checkpoint(x, y) -> dict:
    torch.manual_seed(0)
    first = mlp()
    opt = torch.optim.SGD(first.parameters(), lr=0.2)
    for _ in range(6):
        _epoch(first, opt, x, y, lambda: None)
    return copy.deepcopy(first.state_dict())


def _resume(kind: str, before: bool) -> list:
    x, y = digits()
    ckpt = _checkpoint(x, y)
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(1)
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.05)

        def average():
            if kind == "hand":
                return _Ema(model, 0.999)
            if kind == "lerp":
                return copy.deepcopy(model)
            return swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.999)).eval()

        def update():
            if kind == "hand":
                avg.update(model)
            elif kind == "lerp":  # a state_dict-wide lerp, timm's ModelEmaV3 way
                with torch.no_grad():
                    live = model.state_dict()
                    for k, v in avg.state_dict().items():
                        v.lerp_(live[k], 0.001)
            else:
                avg.update_parameters(model)

        avg = average() if before else None
        model.load_state_dict(ckpt)  # the-load
        if avg is None:
            avg = average()
        _epoch(model, opt, x, y, update)
        evaluated = avg.module if kind == "hand" else avg
        evaluated.eval()
        with torch.no_grad():
            acc = (evaluated(x[1400:]).argmax(1) == y[1400:]).float().mean().item()
    finally:
        findings = session.close()
    return findings, acc


def test_hand_ema_created_before_the_load_is_named_at_the_load():
    findings, acc = _resume("hand", before=True)
    found = [f for f in findings if f.slug == SLUG]
    assert len(found) == 1 and acc < 0.5, (findings, acc)
    assert found[0].where.endswith(f"test_evalcopy_load.py:{_line('the-load')}")
    assert "before its load_state_dict" in found[0].message


def test_hand_ema_created_after_the_load_is_quiet():
    findings, acc = _resume("hand", before=False)
    assert SLUG not in slugs(findings) and acc > 0.8, (findings, acc)


def test_lerped_copy_created_before_the_load_is_named():
    findings, acc = _resume("lerp", before=True)
    assert SLUG in slugs(findings) and acc < 0.5, (findings, acc)


def test_lerped_copy_created_after_the_load_is_quiet():
    findings, acc = _resume("lerp", before=False)
    assert SLUG not in slugs(findings) and acc > 0.8, (findings, acc)


def test_averaged_model_created_before_the_load_is_quiet():
    """AveragedModel copies the model at its first update: created before the load, it loses nothing."""
    findings, acc = _resume("swa", before=True)
    assert SLUG not in slugs(findings) and acc > 0.8, (findings, acc)


def test_best_weights_restored_into_the_trained_model_beside_a_warm_ema_are_quiet():
    """A load into a model already trained in the run is a restore, not a start from a checkpoint."""
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        model = mlp()
        opt = torch.optim.SGD(model.parameters(), lr=0.2)
        ema = _Ema(model, 0.9)
        best = None
        for epoch in range(4):
            _epoch(model, opt, x, y, lambda: ema.update(model))
            if epoch == 1:
                best = copy.deepcopy(model.state_dict())
        model.load_state_dict(best)
        with torch.no_grad():
            ema.module(x[1400:])
    finally:
        findings = session.close()
    assert SLUG not in slugs(findings), findings
