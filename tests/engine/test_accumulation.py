"""Gradient accumulation gives the same update as one big batch, partial windows included."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import Subset

import overt


def _train(data, *, batch_size: int, accumulate: int, epochs: int = 1) -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))  # no dropout, no BatchNorm
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    overt.fit(model, opt, nn.CrossEntropyLoss(), data, batch_size=batch_size, accumulate=accumulate,
              epochs=epochs, progress="off", guards=False, seed=3)
    return model


def _max_diff(a: nn.Module, b: nn.Module) -> float:
    return max((pa - pb).abs().max().item() for pa, pb in zip(a.parameters(), b.parameters()))


# float32 sums in a different order: agreement to ~1e-6 relative is expected, not bit equality
TOL = 1e-5


def test_four_micro_batches_of_16_equal_one_batch_of_64(digits):
    data = Subset(digits[0], range(64))
    accumulated = _train(data, batch_size=16, accumulate=4)
    big = _train(data, batch_size=64, accumulate=1)
    untrained = _train(data, batch_size=64, accumulate=1, epochs=1)
    assert _max_diff(accumulated, big) < TOL
    # and the update is real (not a no-op that trivially matches)
    torch.manual_seed(0)
    init = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
    assert _max_diff(init, untrained) > 1e-3


@pytest.mark.parametrize("n", [80, 70])
def test_last_partial_window_is_normalised_by_its_real_size(digits, n):
    # n=80: windows of 64 and 16 samples; n=70: 64 and 6 (a partial micro-batch too)
    data = Subset(digits[0], range(n))
    accumulated = _train(data, batch_size=16, accumulate=4, epochs=2)
    big = _train(data, batch_size=64, accumulate=1, epochs=2)
    assert _max_diff(accumulated, big) < TOL


def test_window_plan_weights():
    from overt.engine.accumulation import WindowPlan

    plan = WindowPlan.build([16, 16, 16, 16, 16, 6], 4)
    assert plan.closes == (False, False, False, True, False, True)
    assert plan.weights[:4] == (0.25, 0.25, 0.25, 0.25)
    assert plan.weights[4:] == pytest.approx((16 / 22, 6 / 22))


def test_unsized_loader_renormalises_last_window(digits):
    """An iterable loader without a length: the partial last window is rescaled to its real length."""
    data = Subset(digits[0], range(80))

    class Batches:  # an iterable of batches with no __len__
        def __iter__(self):
            for start in range(0, 80, 16):
                xs, ys = zip(*(data[i] for i in range(start, start + 16)))
                yield torch.stack(xs), torch.stack(ys)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    overt.fit(model, opt, nn.CrossEntropyLoss(), Batches(), accumulate=4, epochs=1, progress="off", guards=False)

    torch.manual_seed(0)
    ref = nn.Sequential(nn.Linear(64, 32), nn.Tanh(), nn.Linear(32, 10))
    ref_opt = torch.optim.SGD(ref.parameters(), lr=0.5)
    x = torch.stack([data[i][0] for i in range(80)])
    y = torch.stack([data[i][1] for i in range(80)])
    for sl in (slice(0, 64), slice(64, 80)):
        ref_opt.zero_grad()
        nn.functional.cross_entropy(ref(x[sl]), y[sl]).backward()
        ref_opt.step()
    assert _max_diff(model, ref) < TOL
