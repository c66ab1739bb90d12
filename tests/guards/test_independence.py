"""batch-dependent-eval (overt/guards/independence.py): in eval mode a sample's output must not
depend on the rest of its batch.  Planted bugs and their clean twins, trained on digits."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


class Head(nn.Module):
    """digits -> 10 log-probabilities, normalised over ``dim``."""

    def __init__(self, dim: int):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
        self.out = nn.LogSoftmax(dim=dim)

    def forward(self, x):
        return self.out(self.fc2(torch.relu(self.fc1(x))))


class Rows(nn.Module):
    """digits as 8 rows of 8 pixels through a sequence-first GRU."""

    def __init__(self, mix: bool):
        super().__init__()
        self.mix = mix
        self.rnn, self.fc = nn.GRU(8, 16), nn.Linear(16, 10)

    def forward(self, x):
        x = x.reshape(len(x), 8, 8)  # (batch, time, features)
        x = x.view(8, len(x), 8) if self.mix else x.transpose(0, 1)  # the bug: view, not transpose
        out, _ = self.rnn(x)
        return torch.log_softmax(self.fc(out[-1]), dim=1)


class BatchFirst(nn.Module):
    """digits as 8 rows of 8 pixels, (batch, time, features), through a GRU built with or without
    ``batch_first``: without it the recurrence runs over the batch (the first samples are unaffected)."""

    def __init__(self, batch_first: bool):
        super().__init__()
        self.rnn, self.fc = nn.GRU(8, 16, batch_first=batch_first), nn.Linear(16, 10)

    def forward(self, x):
        out, _ = self.rnn(x.reshape(len(x), 8, 8))
        return torch.log_softmax(self.fc(out[:, -1]), dim=1)


class Norm(nn.Module):
    def __init__(self, track: bool):
        super().__init__()
        self.fc1, self.fc2 = nn.Linear(64, 32), nn.Linear(32, 10)
        self.bn = nn.BatchNorm1d(32, track_running_stats=track)
        self.calls = 0  # state a forward changes: the probe puts it back

    def forward(self, x):
        self.calls += 1
        return torch.log_softmax(self.fc2(torch.relu(self.bn(self.fc1(x)))), dim=1)


class Fold(nn.Module):
    """digits as 8 rows per sample folded into the batch (``(b * 8, 8)``, sample-major) for a per-row embedding,
    plus per-sample features tiled to the rows: ``repeat`` (the bug: sample-minor, so row j of sample i gets
    another sample's features) or ``repeat_interleave`` (sample-major, the twin).  Both folds are row-for-row
    consistent on their own; the mix is the addition of the two in the forward's code."""

    def __init__(self, bug: bool):
        super().__init__()
        self.bug = bug
        self.embed, self.marks = nn.Linear(8, 16), nn.Linear(64, 16)
        self.temporal, self.fc = nn.Linear(16, 16), nn.Linear(8 * 16, 10)

    def forward(self, x):
        b = len(x)
        rows = self.embed(x.reshape(b * 8, 8))
        m = self.marks(x)
        m = m.repeat(8, 1) if self.bug else m.repeat_interleave(8, 0)
        h = rows + self.temporal(m)
        return torch.log_softmax(self.fc(h.reshape(b, 8 * 16)), dim=1)


def _run(model: nn.Module, epochs: int = 2):
    torch.manual_seed(0)
    x, y = digits()
    train = DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(x[1200:], y[1200:]), batch_size=64)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    draws = []
    for _ in range(epochs):
        model.train()
        for xb, yb in train:
            opt.zero_grad()
            nn.functional.nll_loss(model(xb), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for xb, yb in val:
                model(xb)
        draws.append(torch.rand(1).item())  # the user's random stream after each evaluation
    return g.report(), g.session.options.stream.getvalue(), draws


@pytest.mark.parametrize("bug,twin,cause", [
    (lambda: Head(0), lambda: Head(1), "Head.out (LogSoftmax) mixes the samples of its batch (dim=0"),
    (lambda: Rows(True), lambda: Rows(False), "the input of Rows.rnn (GRU) already mixes samples"),
    (lambda: Norm(False), lambda: Norm(True), "Norm.bn (BatchNorm1d) mixes the samples of its batch "
                                              "(track_running_stats=False"),
    (lambda: BatchFirst(False), lambda: BatchFirst(True), "BatchFirst.rnn (GRU) mixes the samples of its batch "
                                                          "(batch_first=False"),
    # the rows of a fold (batch * 8) are mapped back to their samples in either order: named where the two orders
    # meet (session 50, fresh5 TimeMixer: it had been named at the first folded input, row-for-row consistent)
    (lambda: Fold(True), lambda: Fold(False), "the input of Fold.fc (Linear) already mixes samples"),
], ids=["log-softmax-over-batch", "view-folds-batch-and-time", "batchnorm-batch-statistics", "rnn-not-batch-first",
        "fold-tiled-in-another-order"])
def test_a_batch_mixing_model_is_named_and_its_twin_is_silent(bug, twin, cause):
    torch.manual_seed(0)  # the models' initialisation too: not whatever the tests before left in the generator
    findings, text, _ = _run(bug())
    assert "batch-dependent-eval" in slugs(findings), text
    # LogSoftmax(dim=0): both; the view that folds the batch with time is also named where it is (reshape-moves-axis)
    assert set(slugs(findings)) <= {"batch-dependent-eval", "softmax-over-batch", "reshape-moves-axis"}, text
    assert cause in text
    torch.manual_seed(0)
    findings, text, _ = _run(twin())
    assert findings == [], text


class Matching(nn.Module):
    """A matching network's head: each query attends over a support set of embedded digits (read whole by every
    query) and is classified from what it attends to; ``mix`` normalises the log-probabilities over the queries
    (dimension 0), the bug."""

    def __init__(self, mix: bool):
        super().__init__()
        self.mix = mix
        self.embed, self.fc = nn.Linear(64, 32), nn.Linear(32, 10)

    def forward(self, x, support):
        q, s = self.embed(x), self.embed(support)
        att = torch.softmax(q @ s.T / 4, dim=1)
        return torch.log_softmax(self.fc(torch.relu(q + att @ s)), dim=0 if self.mix else 1)


def test_a_support_set_as_large_as_the_batch_is_read_whole_not_cut():
    """fresh8's few-shot matching network: a support set of as many rows as the queries is an argument every query
    reads whole; cutting it with the queries changed the outputs and was reported (false).  Kept whole, the queries'
    outputs are their own: silent.  Normalising over the queries is still named."""
    x, y = digits()
    support = x[1300:1364]
    for mix, expected in ((False, []), (True, ["batch-dependent-eval"])):
        torch.manual_seed(0)
        model = Matching(mix)
        train = DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True)
        val = DataLoader(TensorDataset(x[1200:1264], y[1200:1264]), batch_size=64)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        g = guarded(model, opt, ignore=TIMING | {"softmax-over-batch"})
        for _ in range(2):
            model.train()
            for xb, yb in train:
                opt.zero_grad()
                nn.functional.nll_loss(model(xb, support), yb).backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                for xb, yb in val:
                    model(xb, support)
        findings = g.report()
        assert slugs(findings) == expected, g.session.options.stream.getvalue()


def test_the_probe_leaves_the_run_unchanged():
    # the buggy model's extra forwards: module attributes, buffers and the random stream put back
    torch.manual_seed(1)
    model = Norm(False)
    findings, _, draws = _run(model, epochs=1)
    assert slugs(findings) == ["batch-dependent-eval"]
    train_forwards = len(range(0, 1200, 64))
    val_forwards = len(range(1200, 1797, 64))
    assert model.calls == train_forwards + val_forwards
    torch.manual_seed(1)
    plain = Norm(False)
    torch.manual_seed(0)
    x, y = digits()
    opt = torch.optim.Adam(plain.parameters(), lr=1e-2)
    for xb, yb in DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True):
        opt.zero_grad()
        nn.functional.nll_loss(plain(xb), yb).backward()
        opt.step()
    plain.eval()
    with torch.no_grad():
        for xb, yb in DataLoader(TensorDataset(x[1200:], y[1200:]), batch_size=64):
            plain(xb)
    assert draws == [torch.rand(1).item()]
    for a, b in zip(model.state_dict().values(), plain.state_dict().values()):
        assert torch.equal(a, b)


def test_random_evaluations_are_left_to_the_checks_that_name_them():
    class Noisy(Head):
        def forward(self, x):
            return super().forward(nn.functional.dropout(x, 0.2))  # noqa: OVT205  always on, named by dropout-always-on

    findings, text, _ = _run(Noisy(1))
    assert "batch-dependent-eval" not in slugs(findings), text


class Pooler(nn.Module):
    """Token ids padded to the batch's longest sequence, with the attention mask."""

    def __init__(self, masked: bool):
        super().__init__()
        self.masked = masked
        self.embed, self.head = nn.Embedding(10, 16), nn.Linear(16, 2)

    def forward(self, ids, mask):
        h = self.embed(ids)
        return self.head((h * mask[..., None]).sum(1) if self.masked else h.sum(1))  # the bug: sums padding


@pytest.mark.parametrize("masked,fixed", [(False, False), (True, False), (False, True)])
def test_a_pooling_over_padding_is_named_and_the_masked_twin_is_silent(masked, fixed):
    """With a fixed pad size beyond every sequence (``fixed``: 32 positions for lengths under 24, the
    Chinese-Text-Classification FastText's way, round nineteen's w426 twin) the unmasked pooling reads the same
    padding in every batch: no sequence depends on the others' lengths, silent."""
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(0)

    def batch(n=32):
        lengths = torch.randint(4, 24, (n,), generator=gen)
        ids = torch.randint(1, 10, (n, 32 if fixed else int(lengths.max())), generator=gen)
        ids[torch.arange(ids.shape[1])[None, :] >= lengths[:, None]] = 0
        return ids, ids != 0, (ids == 1).sum(1).gt((ids == 2).sum(1)).long()

    model = Pooler(masked)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for _ in range(20):
        ids, mask, y = batch()
        opt.zero_grad()
        nn.functional.cross_entropy(model(ids, mask), y).backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        ids, mask, _ = batch()
        model(ids, mask)
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert slugs(findings) == ([] if masked or fixed else ["batch-dependent-eval"]), text
    if not masked and not fixed:
        assert "the model reads the padding" in text


class NormLeftTraining(Norm):
    """Running statistics kept, but the norm layer put back in training mode for evaluation (the root in eval
    mode): evaluation normalises with the batch's statistics and moves the running ones on every forward."""

    def train(self, mode: bool = True):
        super().train(mode)
        self.bn.train()
        return self


def test_the_probe_puts_back_running_statistics_that_move_without_a_version_bump():
    # batch_norm updates running_mean/running_var in place without bumping their version counters: the probe's
    # extra forwards must not leave them where those forwards took them
    torch.manual_seed(1)
    model = NormLeftTraining(True)
    findings, text, _ = _run(model, epochs=1)
    assert "batch-dependent-eval" in slugs(findings), text
    torch.manual_seed(1)
    plain = NormLeftTraining(True)
    torch.manual_seed(0)
    x, y = digits()
    opt = torch.optim.Adam(plain.parameters(), lr=1e-2)
    for xb, yb in DataLoader(TensorDataset(x[:1200], y[:1200]), batch_size=64, shuffle=True):
        opt.zero_grad()
        nn.functional.nll_loss(plain(xb), yb).backward()
        opt.step()
    plain.eval()
    with torch.no_grad():
        for xb, yb in DataLoader(TensorDataset(x[1200:], y[1200:]), batch_size=64):
            plain(xb)
    for (name, a), b in zip(model.state_dict().items(), plain.state_dict().values()):
        assert torch.equal(a, b), name
