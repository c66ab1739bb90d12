"""optimizer-state-discarded (overt/guards/optrebuilt.py, issue 33): a stateful optimizer built anew over the
same parameters again and again during the run, its moments and step count thrown away.  One property,
several forms: an Adam built inside the epoch loop over a DataLoader, an AdamW built inside a
``train_epoch()`` helper, an RMSprop rebuilt with its scheduler in a hand loop over token sequences, an
SGD with momentum rebuilt to change its rate; each with a clean twin.  And the rebuilds a correct program
makes, which stay silent: fine-tuning that unfreezes and rebuilds once, a fresh model per cross-validation
fold, trial runs that restore the weights (a learning-rate finder), a stateless SGD rebuilt every epoch,
warm restarts by a scheduler."""

from __future__ import annotations

import pathlib

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import DataLoader, TensorDataset

from tests.guards.helpers import digits, guarded_run, markov_tokens, slugs

SLUG = "optimizer-state-discarded"
HERE = pathlib.Path(__file__)


def _line(marker: str) -> int:
    """The line of this file that carries ``marker`` in a comment."""
    lines = HERE.read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# {marker}"))


def _net() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def _loader() -> DataLoader:
    x, y = digits()
    return DataLoader(TensorDataset(x[:1400], y[:1400]), batch_size=200, shuffle=True,
                      generator=torch.Generator().manual_seed(0))


def _found(findings) -> list:
    return [f for f in findings if f.slug == SLUG]


# -- Adam built inside the epoch loop ---------------------------------------------------------------------
def _epoch_loop(bug: bool):
    model, loader = _net(), _loader()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    for _ in range(4):
        if bug:
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)  # epoch-loop
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def test_adam_built_inside_the_epoch_loop_is_named_at_its_line():
    findings, text = guarded_run(lambda: _epoch_loop(True))
    found = _found(findings)
    assert len(found) == 1, text
    assert found[0].where.endswith(f"test_optimizer_rebuilt.py:{_line('epoch-loop')}")
    assert "exp_avg" in found[0].message and "3 Adams" in found[0].message


def test_adam_built_once_is_silent():
    findings, text = guarded_run(lambda: _epoch_loop(False))
    assert SLUG not in slugs(findings), text


# -- AdamW built inside a train_epoch() helper ------------------------------------------------------------
def _train_epoch(model, loader, opt=None, lr=5e-3):
    if opt is None:
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-2)  # helper
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()


def _helper(bug: bool):
    model, loader = _net(), _loader()
    opt = None if bug else torch.optim.AdamW(model.parameters(), lr=5e-3, weight_decay=1e-2)
    for _ in range(3):
        _train_epoch(model, loader, opt)


def test_adamw_built_in_a_train_epoch_helper_is_named():
    findings, text = guarded_run(lambda: _helper(True))
    found = _found(findings)
    assert len(found) == 1, text
    assert found[0].where.endswith(f"test_optimizer_rebuilt.py:{_line('helper')}")


def test_adamw_passed_to_the_helper_is_silent():
    findings, text = guarded_run(lambda: _helper(False))
    assert SLUG not in slugs(findings), text


# -- RMSprop and its scheduler rebuilt in a hand loop over token sequences ---------------------------------
class _Tagger(nn.Module):
    def __init__(self, vocab: int = 8):
        super().__init__()
        self.emb = nn.Embedding(vocab, 16)
        self.rnn = nn.GRU(16, 32, batch_first=True)
        self.out = nn.Linear(32, vocab)

    def forward(self, tokens):
        return self.out(self.rnn(self.emb(tokens))[0])


def _tokens(bug: bool):
    torch.manual_seed(0)
    seqs = markov_tokens(256, seed=0)
    model = _Tagger()
    opt = torch.optim.RMSprop(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    for _ in range(3):
        if bug:
            opt = torch.optim.RMSprop(model.parameters(), lr=3e-3)  # tokens
            sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
        for i in range(0, 256, 64):
            b = seqs[i:i + 64]
            logits = model(b[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), b[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()


def test_rmsprop_rebuilt_with_its_scheduler_is_named():
    findings, text = guarded_run(lambda: _tokens(True))
    found = _found(findings)
    assert len(found) == 1, text
    assert found[0].where.endswith(f"test_optimizer_rebuilt.py:{_line('tokens')}")
    assert "square_avg" in found[0].message


def test_rmsprop_and_scheduler_built_once_are_silent():
    findings, text = guarded_run(lambda: _tokens(False))
    assert SLUG not in slugs(findings), text


# -- SGD with momentum rebuilt to change the rate -------------------------------------------------------
def _rate_by_rebuild(momentum: float, bug: bool):
    model, loader = _net(), _loader()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=momentum)
    for epoch in range(4):
        lr = 0.1 * 0.7 ** epoch
        if bug:
            opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)  # rate
        else:
            for g in opt.param_groups:
                g["lr"] = lr
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


def test_momentum_sgd_rebuilt_for_each_rate_is_named():
    findings, text = guarded_run(lambda: _rate_by_rebuild(0.9, True))
    found = _found(findings)
    assert len(found) == 1, text
    assert "momentum_buffer" in found[0].message


def test_momentum_sgd_whose_rate_is_set_in_its_groups_is_silent():
    findings, text = guarded_run(lambda: _rate_by_rebuild(0.9, False))
    assert SLUG not in slugs(findings), text


def test_stateless_sgd_rebuilt_every_epoch_loses_nothing_and_is_silent():
    findings, text = guarded_run(lambda: _rate_by_rebuild(0.0, True))
    assert SLUG not in slugs(findings), text


# -- the rebuilds of correct programs --------------------------------------------------------------------
def _epoch(model, opt, loader):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()


def test_unfreezing_and_rebuilding_once_is_silent():
    def run():
        model, loader = _net(), _loader()
        for p in model[0].parameters():
            p.requires_grad_(False)
        opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
        for _ in range(2):
            _epoch(model, opt, loader)
        for p in model.parameters():
            p.requires_grad_(True)
        opt = torch.optim.Adam(model.parameters(), lr=1e-3)
        for _ in range(2):
            _epoch(model, opt, loader)

    findings, text = guarded_run(run)
    assert SLUG not in slugs(findings), text


def test_two_stages_over_the_same_weights_are_silent():
    def run():
        model, loader = _net(), _loader()
        for lr in (1e-2, 1e-3):
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            for _ in range(2):
                _epoch(model, opt, loader)

    findings, text = guarded_run(run)
    assert SLUG not in slugs(findings), text


def test_a_fresh_model_and_optimizer_per_fold_are_silent():
    def run():
        loader = _loader()
        for _ in range(3):
            model = _net()
            opt = torch.optim.Adam(model.parameters(), lr=1e-2)
            for _ in range(2):
                _epoch(model, opt, loader)

    findings, text = guarded_run(run)
    assert SLUG not in slugs(findings), text


def test_trial_runs_that_restore_the_weights_are_silent():
    """A learning-rate finder's way: each trial starts from the saved weights with a new optimizer."""
    def run():
        model, loader = _net(), _loader()
        start = {k: v.clone() for k, v in model.state_dict().items()}
        for lr in (1e-3, 1e-2, 1e-1):
            model.load_state_dict(start)
            opt = torch.optim.Adam(model.parameters(), lr=lr)
            _epoch(model, opt, loader)
        model.load_state_dict(start)
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        for _ in range(2):
            _epoch(model, opt, loader)

    findings, text = guarded_run(run)
    assert SLUG not in slugs(findings), text


def test_warm_restarts_by_a_scheduler_are_silent():
    def run():
        model, loader = _net(), _loader()
        opt = torch.optim.Adam(model.parameters(), lr=1e-2)
        sched = torch.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2)
        for _ in range(6):
            for xb, yb in loader:
                opt.zero_grad()
                F.cross_entropy(model(xb), yb).backward()
                opt.step()
            sched.step()

    findings, text = guarded_run(run)
    assert SLUG not in slugs(findings), text
