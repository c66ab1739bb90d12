"""diverged-fit-kept (issue 33; tests/wild w408): a calibration temperature fitted by LBFGS (no line search) on
the logits of a classifier that separates its validation set, where LBFGS overshoots past zero -- read by
``.item()`` or used in a module's division -- beside the twin that keeps the temperature of the lowest loss; a
fit with a line search, and an LBFGS over a network's parameters, stay silent.  Real small runs on the digits."""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _separable() -> tuple[torch.Tensor, torch.Tensor, object]:
    """Validation logits of a 0-versus-1 classifier trained under a guard (the digits 0 and 1 separate)."""
    torch.manual_seed(0)
    x, y = digits()
    keep = (y == 0) | (y == 1)
    x, y = x[keep], y[keep]
    model = nn.Linear(64, 2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(20):
        loss = F.cross_entropy(model(x[:200]), y[:200])
        opt.zero_grad()
        loss.backward()
        opt.step()
    with torch.no_grad():
        logits = model(x[200:300])
    return logits, y[200:300], g


class _Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.temperature = nn.Parameter(torch.ones(1))

    def forward(self, logits: torch.Tensor) -> torch.Tensor:
        return logits / self.temperature


def _calibrate(keep: str, line_search: str | None = None) -> tuple[list, str]:
    logits, labels, g = _separable()
    scaler = _Scaled()
    t_opt = torch.optim.LBFGS(scaler.parameters(), max_iter=50, line_search_fn=line_search)
    best = {"loss": float("inf"), "t": 1.0}

    def closure() -> torch.Tensor:
        t_opt.zero_grad()
        loss = F.cross_entropy(scaler(logits), labels)
        loss.backward()
        if loss.item() < best["loss"]:
            best["loss"], best["t"] = loss.item(), float(scaler.temperature.detach())
        return loss

    t_opt.step(closure)
    if keep == "item":
        t = scaler.temperature.item()
        probs = F.softmax(logits / t, 1)
    elif keep == "module":
        with torch.no_grad():
            probs = F.softmax(scaler(logits), 1)
    else:
        probs = F.softmax(logits / best["t"], 1)
    assert probs.shape == logits.shape
    return g.report(), g.session.options.stream.getvalue()


def test_the_last_temperature_read_by_item_is_named():
    findings, text = _calibrate("item")
    assert slugs(findings) == ["diverged-fit-kept"], text
    assert "tests/guards/test_fitkept.py:" in text, text


def test_the_last_temperature_used_by_its_module_is_named():
    findings, text = _calibrate("module")
    assert slugs(findings) == ["diverged-fit-kept"], text


def test_the_best_temperature_kept_is_silent():
    before = {name: getattr(torch.Tensor, name) for name in ("item", "__mul__", "__truediv__", "clone")}
    findings, text = _calibrate("best")
    assert slugs(findings) == [], text
    # the diverged temperature stayed pending to the end of the run; the tensor methods are torch's again
    assert {name: getattr(torch.Tensor, name) for name in before} == before


def test_a_fit_with_a_line_search_is_silent():
    findings, text = _calibrate("item", line_search="strong_wolfe")
    assert slugs(findings) == [], text


def test_a_network_fitted_by_lbfgs_is_silent():
    torch.manual_seed(0)
    x, y = digits()
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.LBFGS(model.parameters(), lr=1.0, max_iter=5)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(3):
        def closure() -> torch.Tensor:
            opt.zero_grad()
            loss = F.cross_entropy(model(x[:300]), y[:300])
            loss.backward()
            return loss

        opt.step(closure)
    assert model[0].weight.sum().item() == model[0].weight.sum().item()
    findings = [f for f in g.report() if f.slug == "diverged-fit-kept"]
    assert findings == [], g.session.options.stream.getvalue()
