"""batch-dependent-eval in evaluation passes that never call ``model.eval()`` (overt/guards/independence.py):
under ``no_grad`` a model still in training mode whose every layer behaves the same in both modes predicts
exactly as it would in eval mode, so a sample's output must not depend on the rest of its batch there either.
Planted bugs of different forms (attention over a packed batch without its block mask, lengths left in sorted
order, a normalisation over dimension 0), each with a clean twin; a model with a mode-dependent layer is left
alone (its batch statistics in training mode are train-mode-in-eval's)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


class Packed(nn.Module):
    """digits as 8 row tokens; evaluation packs the whole batch into one sequence, as encoders of several
    images do, with (twin) or without (bug) the block-diagonal mask that keeps each image to itself."""

    def __init__(self, mask: bool):
        super().__init__()
        self.mask = mask
        self.embed, self.pos = nn.Linear(8, 32), nn.Parameter(torch.zeros(8, 32))
        self.attn = nn.MultiheadAttention(32, 4, batch_first=True)
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        n = len(x)
        h = (self.embed(x.reshape(n, 8, 8)) + self.pos).reshape(1, n * 8, 32)
        owner = torch.arange(n, device=x.device).repeat_interleave(8)
        a, _ = self.attn(h, h, h, attn_mask=owner[:, None] != owner[None, :] if self.mask else None)
        return torch.log_softmax(self.head((h + a).reshape(n, 8, 32).mean(1)), dim=1)


class SortedLengths(nn.Module):
    """Mean over each digit's first rows (as many as it has rows of more than its mean ink); the batch is sorted by
    length, the pooled rows are put back in batch order, and the lengths too (twin) or not (bug)."""

    def __init__(self, unsort: bool):
        super().__init__()
        self.unsort = unsort
        self.rows, self.fc = nn.Linear(8, 32), nn.Linear(32, 10)

    def forward(self, x):
        rows = x.reshape(len(x), 8, 8)
        ink = rows.sum(2)
        lengths = (ink > ink.mean(1, keepdim=True)).sum(1).clamp(min=1)  # a length of its own per digit
        lengths, order = torch.sort(lengths, descending=True)
        h = torch.relu(self.rows(rows[order]))
        keep = torch.arange(8, device=x.device)[None, :] < lengths[:, None]
        summed = (h * keep[..., None]).sum(1)[torch.argsort(order)]
        if self.unsort:
            lengths = lengths[torch.argsort(order)]
        return torch.log_softmax(self.fc(summed / lengths[:, None]), dim=1)


class Standardised(nn.Module):
    """Features standardised by hand: over each sample's features (twin) or over the batch (bug)."""

    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        h = self.fc1(x)
        h = (h - h.mean(self.dim, keepdim=True)) / (h.std(self.dim, keepdim=True) + 1e-5)
        return torch.log_softmax(self.fc2(torch.relu(h)), dim=1)


class StandardisedBN(Standardised):
    """The same bug next to a BatchNorm: training mode changes this model, so the probe cannot compare like
    with like (the batch statistics in training mode are train-mode-in-eval's to name)."""

    def __init__(self):
        super().__init__(0)
        self.bn = nn.BatchNorm1d(32)

    def forward(self, x):
        return super().forward(x) + 0 * self.bn(self.fc1(x)).sum(1, keepdim=True)


def _run(model: nn.Module, epochs: int = 2, ema: bool = False):
    torch.manual_seed(0)
    x, y = digits()
    train = DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1200:], y[1200:]), batch_size=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    average = [p.detach().clone() for p in model.parameters()]
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(epochs):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            nn.functional.nll_loss(model(xb), yb).backward()
            opt.step()
            if ema:  # an average of the weights updated under no_grad after every step: no forward there
                with torch.no_grad():
                    for a, p in zip(average, model.parameters()):
                        a.mul_(0.99).add_(p, alpha=0.01)
        if ema and epoch < epochs - 1:
            continue  # evaluated once, at the end
        with torch.no_grad():  # no model.eval(): the layers above behave the same in both modes
            correct = sum(int((model(xb).argmax(1) == yb).sum()) for xb, yb in val)
        assert correct > 0
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("bug,twin", [
    (lambda: Packed(False), lambda: Packed(True)),
    (lambda: SortedLengths(False), lambda: SortedLengths(True)),
    (lambda: Standardised(0), lambda: Standardised(1)),
], ids=["packed-without-block-mask", "lengths-left-sorted", "standardised-over-batch"])
def test_an_evaluation_in_training_mode_of_a_mode_free_model_is_probed(bug, twin):
    torch.manual_seed(0)  # the models' initialisation too: not whatever the tests before left in the generator
    findings, text = _run(bug())
    assert "batch-dependent-eval" in slugs(findings), text
    assert "with the model still in training mode" in text
    torch.manual_seed(0)
    findings, text = _run(twin())
    assert findings == [], text


def test_a_model_the_mode_changes_is_not_probed_in_training_mode():
    findings, text = _run(StandardisedBN())
    assert "batch-dependent-eval" not in slugs(findings), text


@pytest.mark.parametrize("bug", [True, False])
def test_no_grad_blocks_without_a_forward_do_not_use_up_the_probe(bug):
    """An average of the weights updated under ``no_grad`` after each of the 57 steps of three epochs, then one
    evaluation: those blocks run no forward, so they spend none of the probe's
    tries, and the evaluation after them is still probed (before, each such block placed the probe for
    the next forward, a training one, and 20 of them left nothing for the evaluation)."""
    findings, text = _run(Standardised(0 if bug else 1), epochs=3, ema=True)
    assert slugs(findings) == (["batch-dependent-eval"] if bug else []), text


def test_a_no_grad_site_that_never_evaluates_stops_being_armed():
    """The averaging block's site is armed on its first entries only (then skipped: no hook placed and
    removed on every step), the evaluation's site stays armed; counts, so the same on every machine."""
    from overt.guards.blocksites import EMPTY_ENTRIES

    model = Standardised(1)
    torch.manual_seed(0)
    x, y = digits()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    average = [p.detach().clone() for p in model.parameters()]
    g = guarded(model, opt, ignore=TIMING)
    for i in range(0, 1280, 64):
        opt.zero_grad()
        nn.functional.nll_loss(model(x[i:i + 64]), y[i:i + 64]).backward()
        opt.step()
        with torch.no_grad():
            for a, p in zip(average, model.parameters()):
                a.mul_(0.99).add_(p, alpha=0.01)
    sites = g.session.block_sites
    assert list(sites.empty.values()) == [EMPTY_ENTRIES] and not sites.evaluates
    assert g.session.independence.tries == {id(next(iter(g.session.models.values()))): 0}
    with torch.no_grad():
        model(x[1280:1344])
    assert len(sites.evaluates) == 1
    assert g.report() == []
