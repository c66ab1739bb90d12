"""group-lr-not-applied (overt/guards/grouprates.py, issue 33): parameters that train at another learning
rate than the one their parameter group was given.  One property, several forms: a group whose filter
matched nothing (a name prefix, another architecture's names), and distinct group rates collapsed to one
(a hand-written loop, OneCycleLR with one max_lr, a scheduler class that takes one peak for every group);
each with a clean twin.  Small real runs on digits and on token sequences."""

from __future__ import annotations

import io
import math

import pytest
import torch
from torch import nn
from torch.nn import functional as F

import overt
from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, markov_tokens, slugs


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.backbone(x))


class Wrapper(nn.Module):
    """Parameter names read ``model.backbone...`` and ``model.head...``."""

    def __init__(self):
        super().__init__()
        self.model = Policy()

    def forward(self, x):
        return self.model(x)


def _session() -> GuardSession:
    return GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)


def _fit(model, opt, steps: int = 30, after_step=None) -> None:
    x, y = digits()
    g = torch.Generator().manual_seed(0)
    for step in range(steps):
        idx = torch.randint(0, 1500, (32,), generator=g)
        loss = F.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if after_step is not None:
            after_step(step)


def _guarded(build) -> list:
    """Findings of a 30-step digits run of ``build()``'s (model, optimizer, after_step or None), built under
    the guard session (so the optimizer's construction is seen)."""
    session = _session()
    try:
        torch.manual_seed(0)
        model, opt, after_step = build()
        _fit(model, opt, after_step=after_step)
    finally:
        findings = session.close()
    return findings


# -- a group whose filter matched nothing -------------------------------------------------------------
def _name_filter_run(is_backbone) -> list:
    def build():
        policy = Wrapper()
        params = [
            {"params": [p for n, p in policy.named_parameters() if not is_backbone(n)]},
            {"params": [p for n, p in policy.named_parameters() if is_backbone(n)], "lr": 1e-5},
        ]
        return policy, torch.optim.Adam(params, lr=3e-2), None

    return _guarded(build)


def test_a_prefix_filter_that_matches_nothing_is_named():
    findings = _name_filter_run(lambda n: n.startswith("backbone"))
    assert slugs(findings) == ["group-lr-not-applied"]
    message = findings[0].message
    assert "param group 1" in message and "holds no parameters" in message and "lr=1e-05" in message
    assert "test_group_rates.py:" in findings[0].where


def test_a_filter_that_matches_the_backbone_is_quiet():
    assert _name_filter_run(lambda n: "backbone" in n.split(".")) == []


class TokenClassifier(nn.Module):
    """A small sequence model whose layers are named like a RoBERTa checkpoint's."""

    def __init__(self, vocab: int = 8):
        super().__init__()
        self.roberta = nn.ModuleDict({"embeddings": nn.Embedding(vocab, 32),
                                      "encoder": nn.GRU(32, 32, batch_first=True)})
        self.classifier = nn.Linear(32, vocab)

    def forward(self, tokens):
        h, _ = self.roberta["encoder"](self.roberta["embeddings"](tokens))
        return self.classifier(h)


def _layerwise_run(prefix: str, guard_after_build: bool = False) -> list:
    """Layer-wise rates written for another architecture's parameter names (``bert.``): built before the
    guard is attached when ``guard_after_build`` (what ``overt.guard`` sees)."""
    torch.manual_seed(0)
    model = TokenClassifier()
    encoder = [p for n, p in model.named_parameters() if n.startswith(prefix)]
    rest = [p for n, p in model.named_parameters() if not n.startswith(prefix)]
    build = lambda: torch.optim.AdamW([{"params": encoder, "lr": 2e-5}, {"params": rest, "lr": 5e-3}])  # noqa: E731
    opt = build() if guard_after_build else None
    session = _session()
    try:
        if opt is None:
            opt = build()
        seq = markov_tokens(256, seed=1)
        for step in range(12):
            batch = seq[(step * 16) % 240:(step * 16) % 240 + 16]
            logits = model(batch[:, :-1])
            loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), batch[:, 1:].reshape(-1))
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        findings = session.close()
    return findings


def test_layerwise_rates_for_another_architecture_are_named():
    findings = _layerwise_run("bert.")
    assert slugs(findings) == ["group-lr-not-applied"]
    assert "param group 0" in findings[0].message and "lr=2e-05" in findings[0].message


def test_layerwise_rates_seen_only_after_the_optimizer_was_built_are_named():
    findings = _layerwise_run("bert.", guard_after_build=True)
    assert slugs(findings) == ["group-lr-not-applied"]


def test_layerwise_rates_for_the_right_names_are_quiet():
    assert _layerwise_run("roberta.") == []


def test_an_empty_group_for_a_frozen_backbone_is_quiet():
    """The backbone is frozen and left out of the optimizer: the empty group may be meant for it."""
    def build():
        policy = Wrapper()
        policy.model.backbone.requires_grad_(False)
        params = [
            {"params": [p for n, p in policy.named_parameters() if "backbone" in n and p.requires_grad], "lr": 1e-5},
            {"params": [p for n, p in policy.named_parameters() if "backbone" not in n]},
        ]
        return policy, torch.optim.Adam(params, lr=3e-2), None

    assert _guarded(build) == []


def test_an_empty_catch_all_group_beside_two_filled_ones_is_quiet():
    """Backbone and head each have their group; the group for "the rest" is empty because nothing is left."""
    def build():
        policy = Wrapper()
        named = list(policy.named_parameters())
        params = [
            {"params": [p for n, p in named if ".backbone." in n], "lr": 1e-4},
            {"params": [p for n, p in named if ".head." in n], "lr": 1e-2},
            {"params": [p for n, p in named if ".backbone." not in n and ".head." not in n], "lr": 1e-3},
        ]
        return policy, torch.optim.Adam(params), None

    assert _guarded(build) == []


def test_an_empty_group_at_another_groups_rate_is_quiet():
    """A no-decay group left empty (a model without biases) loses no rate."""
    def build():
        model = nn.Sequential(nn.Linear(64, 64, bias=False), nn.ReLU(), nn.Linear(64, 10, bias=False))
        opt = torch.optim.AdamW([{"params": [p for p in model.parameters() if p.dim() >= 2], "weight_decay": 0.1},
                                 {"params": [p for p in model.parameters() if p.dim() < 2], "weight_decay": 0.0}],
                                lr=3e-3)
        return model, opt, None

    assert _guarded(build) == []


# -- distinct group rates collapsed to one ------------------------------------------------------------
def _two_rates(model: Policy, opt_cls=torch.optim.Adam, **kwargs):
    return opt_cls([{"params": model.backbone.parameters(), "lr": 1e-4},
                    {"params": model.head.parameters(), "lr": 1e-2}], **kwargs)


def _hand_loop_run(per_group: bool) -> list:
    session = _session()
    try:
        torch.manual_seed(0)
        model = Policy()
        opt = _two_rates(model)
        peak, warmup = 1e-2, 20
        x, y = digits()
        for step in range(30):
            factor = min(1.0, (step + 1) / warmup)
            for g in opt.param_groups:
                if not per_group:
                    g["lr"] = peak * factor
                else:
                    g.setdefault("peak_lr", g["lr"])
                    g["lr"] = g["peak_lr"] * factor
            loss = F.cross_entropy(model(x[step * 32:(step + 1) * 32]), y[step * 32:(step + 1) * 32])
            opt.zero_grad()
            loss.backward()
            opt.step()
    finally:
        findings = session.close()
    return findings


def test_a_hand_written_warmup_with_one_rate_is_named_at_its_line():
    findings = _hand_loop_run(per_group=False)
    assert slugs(findings) == ["group-lr-not-applied"]
    assert "distinct learning rates (0.0001, 0.01)" in findings[0].message
    line = findings[0].where.rsplit(":", 1)[1]
    with open(__file__) as f:
        assert 'g["lr"] = peak * factor' in f.read().splitlines()[int(line) - 1]


def test_a_hand_written_warmup_of_each_groups_rate_is_quiet():
    assert _hand_loop_run(per_group=True) == []


@pytest.mark.parametrize("max_lr,expected", [(1e-2, ["group-lr-not-applied"]), ([1e-4, 1e-2], [])])
def test_one_cycle_with_one_max_lr(max_lr, expected):
    session = _session()
    try:
        torch.manual_seed(0)
        model = Policy()
        opt = _two_rates(model, torch.optim.SGD, momentum=0.9)
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=max_lr, total_steps=30)
        _fit(model, opt, after_step=lambda _: sched.step())
    finally:
        findings = session.close()
    assert slugs(findings) == expected
    if expected:
        assert "OneCycleLR (`sched`)" in findings[0].message


class CosineWarmup:
    """A warm-up then cosine decay whose peak is the optimizer's constructor rate (``defaults``)."""

    def __init__(self, optimizer, total: int, warmup: int = 10, per_group: bool = False):
        self.optimizer, self.total, self.warmup, self.n = optimizer, total, warmup, 0
        self.peaks = ([g["lr"] for g in optimizer.param_groups] if per_group
                      else [optimizer.defaults["lr"]] * len(optimizer.param_groups))
        self.step()

    def step(self):
        self.n += 1
        t = self.n / self.warmup if self.n < self.warmup else 0.5 * (1 + math.cos(math.pi * self.n / self.total))
        for group, peak in zip(self.optimizer.param_groups, self.peaks):
            group["lr"] = peak * t


@pytest.mark.parametrize("per_group,expected", [(False, ["group-lr-not-applied"]), (True, [])])
def test_a_scheduler_class_with_one_peak(per_group, expected):
    session = _session()
    try:
        torch.manual_seed(0)
        model = Policy()
        opt = _two_rates(model, torch.optim.AdamW, lr=3e-3)
        sched = CosineWarmup(opt, total=30, per_group=per_group)
        _fit(model, opt, after_step=lambda _: sched.step())
    finally:
        findings = session.close()
    assert slugs(findings) == expected
    if expected:
        assert "CosineWarmup (`sched`)" in findings[0].message
        line = int(findings[0].where.rsplit(":", 1)[1])
        with open(__file__) as f:
            assert 'group["lr"] = peak * t' in f.read().splitlines()[line - 1]


@pytest.mark.parametrize("kind", ["lambda-warmup", "common-floor", "cosine-floor"])
def test_schedules_that_keep_each_groups_rate_are_quiet(kind):
    session = _session()
    try:
        torch.manual_seed(0)
        model = Policy()
        opt = _two_rates(model)
        if kind == "lambda-warmup":
            sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: min(1.0, (s + 1) / 10))
            step = sched.step
        elif kind == "cosine-floor":  # every group decays to one eta_min, at the end of the run only
            sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=30, eta_min=1e-6)
            step = sched.step
        else:  # fairseq-style: every group warms up from one common initial rate to its own peak
            peaks = [g["lr"] for g in opt.param_groups]
            for g in opt.param_groups:
                g["lr"] = 1e-7

            def step(n=[0]):  # noqa: B006  a counter kept across calls
                n[0] += 1
                for g, peak in zip(opt.param_groups, peaks):
                    g["lr"] = 1e-7 + (peak - 1e-7) * min(1.0, n[0] / 10)
        _fit(model, opt, after_step=lambda _: step())
    finally:
        findings = session.close()
    assert findings == []


def test_overt_guard_on_a_collapsed_warmup(tmp_path):
    """The public API: ``overt.guard`` given the optimizer before the scheduler is made."""
    torch.manual_seed(0)
    model = Policy()
    opt = _two_rates(model)
    with overt.guard(model, opt, stream=io.StringIO(), ignore=TIMING) as g:
        sched = CosineWarmup(opt, total=30)
        _fit(model, opt, after_step=lambda _: sched.step())
    assert "group-lr-not-applied" in slugs(g.findings)


def test_the_line_that_writes_the_rate_is_found_in_its_own_scope(tmp_path):
    from overt.guards.grouprates import _lr_write

    script = tmp_path / "loop.py"
    script.write_text(
        "def helper(opt):\n"
        "    opt.param_groups[0]['lr'] = 0.1\n"
        "\n"
        "def train(opt):\n"
        "    def inner(g):\n"
        "        g['lr'] = 0.2\n"
        "    for g in opt.param_groups:\n"
        "        g['lr'] *= 0.5\n"
        "\n"
        "for g in []:\n"
        "    g['lr'] = 0.3\n"
    )
    assert _lr_write(str(script), 4) == 8  # train's own write, not the nested function's
    assert _lr_write(str(script), None) == 11  # the module level's, not a function's
    assert _lr_write(str(script), 1) == 2
    assert _lr_write(str(tmp_path / "missing.py"), None) is None
