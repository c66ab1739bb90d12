"""lengths-do-not-fit-output (issue 33; tests/wild w246): a subsampling front end whose returned lengths do not fit
its output -- an off-by-one formula, a stride of 2 where the layers subsample by 4 (the lengths run past the
output) -- each beside its twin with the layers' own formula; an output laid out (batch, channels, time), a batch
padded to a fixed size and lengths passed on by an outer module silent or judged once.  Real small runs: the
digits read as sequences of pixels, cut to random lengths, classified by masked mean pooling."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.guards.helpers import digits, guarded_run, slugs


class FrontEnd(nn.Module):
    """Two stride-2 convolutions over (batch, time, features); returns the frames and their lengths."""

    def __init__(self, formula: str, channels_first: bool = False):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(1, 16, 3, 2, 1), nn.ReLU(), nn.Conv1d(16, 16, 3, 2, 1), nn.ReLU())
        self.formula, self.channels_first = formula, channels_first

    def forward(self, x, lengths):
        h = self.conv(x.transpose(1, 2))
        if self.formula == "right":
            out_lengths = (lengths - 1) // 4 + 1
        elif self.formula == "off-by-one":
            out_lengths = lengths // 4 - 1
        else:  # "stride-2": the lengths of one convolution only
            out_lengths = (lengths - 1) // 2 + 1
        return (h if self.channels_first else h.transpose(1, 2)), out_lengths


class Classifier(nn.Module):
    def __init__(self, formula: str, channels_first: bool = False):
        super().__init__()
        self.front = FrontEnd(formula, channels_first)
        self.head = nn.Linear(16, 10)
        self.channels_first = channels_first

    def forward(self, x, lengths):
        h, out_lengths = self.front(x, lengths)
        if self.channels_first:
            h = h.transpose(1, 2)
        mask = (torch.arange(h.shape[1])[None] < out_lengths[:, None]).float()
        pooled = (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True).clamp(min=1)
        return self.head(pooled), out_lengths


def _batches(n: int, fixed: int | None = None):
    """(x (B, T, 1), lengths, labels): each digit's 64 pixels cut to a random length of 40-64, padded to the
    batch's longest item (or to ``fixed`` frames)."""
    xs, ys = digits()
    g = torch.Generator().manual_seed(0)
    for i in range(n):
        x, y = xs[32 * i:32 * (i + 1)], ys[32 * i:32 * (i + 1)]
        lengths = torch.randint(40, 65, (32,), generator=g)
        lengths[0] = 64 if fixed is None else 60
        size = int(lengths.max()) if fixed is None else fixed
        frames = torch.zeros(32, size, 1)
        for j, n_j in enumerate(lengths.tolist()):
            frames[j, :n_j, 0] = x[j, :n_j]
        yield frames, lengths, y


def _train(formula: str, channels_first: bool = False, fixed: int | None = None) -> tuple[list, str]:
    torch.manual_seed(0)
    model = Classifier(formula, channels_first)

    def run():
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for x, lengths, y in _batches(8, fixed):
            logits, _ = model(x, lengths)
            loss = F.cross_entropy(logits, y)
            opt.zero_grad()
            loss.backward()
            opt.step()

    return guarded_run(run, check_every=2)


@pytest.mark.parametrize("formula", ["off-by-one", "stride-2"])
def test_lengths_that_fit_no_axis_of_the_output_are_named_at_the_front_end(formula):
    findings, text = _train(formula)
    assert slugs(findings) == ["lengths-do-not-fit-output"], text
    assert "FrontEnd.forward" in text and "Classifier.forward" not in text, text


@pytest.mark.parametrize("kw", [dict(), dict(channels_first=True)], ids=["time-second", "channels-first"])
def test_the_layers_own_formula_is_silent(kw):
    findings, text = _train("right", **kw)
    assert "lengths-do-not-fit-output" not in slugs(findings), text


def test_a_batch_padded_to_a_fixed_size_proves_nothing():
    findings, text = _train("off-by-one", fixed=72)
    assert "lengths-do-not-fit-output" not in slugs(findings), text
