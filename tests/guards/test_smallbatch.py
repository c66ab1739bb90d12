"""batch-dependent-eval for batches too small to cut in two (overt/guards/smallbatch.py): a row evaluated alone
gets the output it gets in a batch of copies.  Planted bugs and their clean twins, trained on digits, evaluated one
row per forward as a serving endpoint does."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


class SkipNorm(nn.Module):
    """A BatchNorm on the input that the buggy version skips for a one-row batch, in eval mode too."""

    def __init__(self, bug: bool):
        super().__init__()
        self.bug = bug
        self.bn = nn.BatchNorm1d(64)

    def forward(self, x):
        if len(x) == 1 and (self.bug or self.training):
            return x
        return self.bn(x)


class Net(nn.Module):
    def __init__(self, bug: bool):
        super().__init__()
        self.norm, self.fc1, self.fc2 = SkipNorm(bug), nn.Linear(64, 32), nn.Linear(32, 10)
        self.calls = 0  # state a forward changes: the probe puts it back

    def forward(self, x):
        self.calls += 1
        return self.fc2(torch.relu(self.fc1(self.norm(x * 4 + 3))))


class Pool(nn.Module):
    """Per-sample outputs summed over the batch by a layer that means to sum over features (dim=0 where the
    batch's features lie in dim 1): a one-row batch hides it from the half-batch probe."""

    def __init__(self, bug: bool):
        super().__init__()
        self.bug = bug
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x):
        h = torch.relu(self.fc1(x))
        return self.fc2(h / (h.sum(0, keepdim=True) if self.bug else h.sum(1, keepdim=True)).clamp_min(1e-3))


def _run(model: nn.Module, per_forward: int = 1, loader: bool = False):
    torch.manual_seed(0)
    x, y = digits()
    train = DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    model.train()
    for xb, yb in train:
        opt.zero_grad()
        nn.functional.cross_entropy(model(xb), yb).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        if loader:
            for xb, _ in DataLoader(TensorDataset(x[1200:1300], y[1200:1300]), batch_size=per_forward):
                model(xb)
        else:
            for j in range(1200, 1300, per_forward):
                model(x[j:j + per_forward])
    draws = torch.rand(1).item()  # the user's random stream after evaluation
    return g.report(), g.session.options.stream.getvalue(), draws


def test_a_norm_skipped_for_one_row_is_named_at_its_branch_and_its_twin_is_silent():
    findings, text, _ = _run(Net(True))
    assert slugs(findings) == ["batch-dependent-eval"], text
    assert "a row evaluated alone (a batch of 1" in text
    assert "Net.norm (SkipNorm) takes another path for a batch of 1: Net.norm.bn runs" in text
    assert "test_smallbatch.py:25" in text  # the ``if len(x) == 1`` line of SkipNorm.forward
    findings, text, _ = _run(Net(False))
    assert findings == [], text


def test_a_sum_over_the_batch_is_named_for_rows_evaluated_alone_from_a_loader():
    findings, text, _ = _run(Pool(True), loader=True)
    assert slugs(findings) == ["batch-dependent-eval"], text
    assert "in a batch of 4 copies" in text
    findings, text, _ = _run(Pool(False), loader=True)
    assert findings == [], text


@pytest.mark.parametrize("per_forward", [2, 3])
def test_batches_of_two_and_three_are_compared_with_their_copies(per_forward):
    findings, text, _ = _run(Net(True), per_forward=per_forward)
    assert findings == [], text  # the norm runs for 2 and 3 rows: nothing depends on the batch
    findings, text, _ = _run(Pool(True), per_forward=per_forward)
    assert slugs(findings) == ["batch-dependent-eval"], text
    assert f"the rows of a batch of {per_forward}" in text


def test_the_probe_leaves_the_run_unchanged():
    torch.manual_seed(1)
    model = Net(True)
    findings, _, draw = _run(model)
    assert slugs(findings) == ["batch-dependent-eval"]
    torch.manual_seed(1)
    plain = Net(True)
    torch.manual_seed(0)
    x, y = digits()
    opt = torch.optim.Adam(plain.parameters(), lr=1e-2)
    for xb, yb in DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True):
        opt.zero_grad()
        nn.functional.cross_entropy(plain(xb), yb).backward()
        opt.step()
    plain.eval()
    with torch.no_grad():
        for j in range(1200, 1300):
            plain(x[j:j + 1])
    assert draw == torch.rand(1).item()
    assert model.calls == plain.calls
    for a, b in zip(model.state_dict().values(), plain.state_dict().values()):
        assert torch.equal(a, b)


def test_silent_where_dimension_zero_is_not_proven_the_batch():
    # a GRU fed one unbatched sequence (time, features) per forward, of another length each time: dimension 0 is
    # time, and a one-step sequence is not a batch of one
    class Seq(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.fc = nn.GRU(8, 16, bidirectional=True), nn.Linear(32, 10)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.fc(out)

    torch.manual_seed(0)
    x, y = digits()
    model = Seq()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for j in range(60):
        steps = 2 + j % 7
        seq = x[j, :steps * 8].reshape(steps, 8)
        opt.zero_grad()
        nn.functional.cross_entropy(model(seq), y[j].repeat(steps)).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        for j in range(100, 110):
            model(x[j, :8].reshape(1, 8))
    findings = g.report()
    assert "batch-dependent-eval" not in slugs(findings), g.session.options.stream.getvalue()
