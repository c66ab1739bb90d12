"""eval-pass-changes-training (overt/guards/evalwrites.py, issue 33): an eval-mode forward that assigns a
module's own setting (a dropout rate set to 0, NVIDIA/Megatron-LM#411) keeps it for the rest of training.
Correct programs near the premise stay silent: the rate chosen per call, a setting recomputed from
``self.training`` in every forward, one that ``train()`` puts back, a rate the loop anneals between epochs,
BatchNorm and nn.Dropout.  Small real runs on digits, found as ``overt run`` finds them."""

from __future__ import annotations

import io

import torch
import torch.nn.functional as F
from torch import nn

from overt.guards.options import GuardOptions
from overt.guards.session import GuardSession
from tests.conftest import TIMING
from tests.guards.helpers import digits, slugs


class RateDropout(nn.Module):
    """A dropout whose rate is an attribute its forward reads, written four ways."""

    def __init__(self, p: float, how: str):
        super().__init__()
        self.p, self.how, self.keep = p, how, p

    def forward(self, x):
        if self.how == "bug":
            if not self.training:
                self.p = 0.0
            return F.dropout(x, self.p, training=True)
        if self.how == "recomputed":  # set in every forward from the mode: training puts it back itself
            self.p = self.keep if self.training else 0.0
            return F.dropout(x, self.p, training=True)
        if self.how == "restored":  # train() puts it back
            if not self.training:
                self.p = 0.0
            return F.dropout(x, self.p, training=True)
        return F.dropout(x, self.p if self.training else 0.0, training=True)  # per call

    def train(self, mode: bool = True):
        if mode and self.how == "restored":
            self.p = self.keep
        return super().train(mode)


def _train_and_evaluate(build, epochs: int, before_epoch=None) -> list:
    """``build()`` -> (model, optimizer), trained ``epochs`` epochs of 12 steps on digits, each followed by an
    evaluation, under a guard session that finds them itself (``overt run``'s way): the findings."""
    x, y = digits()
    session = GuardSession(GuardOptions(stream=io.StringIO(), ignore=TIMING), auto=True)
    try:
        torch.manual_seed(0)
        model, opt = build()
        for epoch in range(epochs):
            if before_epoch is not None:
                before_epoch(epoch)
            model.train()
            for i in range(12):
                j = (epoch * 12 + i) * 32 % 1400
                loss = F.cross_entropy(model(x[j:j + 32]), y[j:j + 32])
                opt.zero_grad()
                loss.backward()
                opt.step()
            model.eval()
            with torch.no_grad():
                acc = (model(x[1500:]).argmax(1) == y[1500:]).float().mean().item()
    finally:
        findings = session.close()
    assert 0.0 <= acc <= 1.0
    return findings


def _run(how: str, anneal: bool = False, bn: bool = False) -> list:
    drop = RateDropout(0.5, how)  # no parameters: built before the seed, the same draws

    def build():
        layers = [nn.Linear(64, 64)] + ([nn.BatchNorm1d(64)] if bn else []) + [nn.ReLU(), drop, nn.Linear(64, 10)]
        model = nn.Sequential(*layers)
        return model, torch.optim.Adam(model.parameters(), lr=1e-3)

    def anneal_rate(epoch: int) -> None:
        drop.p = drop.keep = 0.5 - 0.1 * epoch

    return _train_and_evaluate(build, 5, anneal_rate if anneal else None)


def test_an_eval_forward_that_zeroes_the_dropout_rate_is_named():
    findings = _run("bug")
    assert slugs(findings) == ["eval-pass-changes-training"]
    f = findings[0]
    assert "Sequential.2.p from 0.5 to 0.0" in f.message and "test_evalwrites.py:" in f.where
    assert "self.p" in f.fix


def test_the_rate_chosen_per_call_is_silent():
    assert "eval-pass-changes-training" not in slugs(_run("per-call"))


def test_a_setting_every_forward_recomputes_is_silent():
    assert "eval-pass-changes-training" not in slugs(_run("recomputed"))


def test_a_setting_train_puts_back_is_silent():
    assert "eval-pass-changes-training" not in slugs(_run("restored"))


def test_a_rate_the_loop_anneals_and_batchnorm_are_silent():
    assert "eval-pass-changes-training" not in slugs(_run("per-call", anneal=True, bn=True))
    assert "eval-pass-changes-training" not in slugs(_run("recomputed", anneal=True, bn=True))


def test_the_bug_is_named_beside_batchnorm():
    assert "eval-pass-changes-training" in slugs(_run("bug", bn=True))


class Prototypes(nn.Module):
    """Class prototypes (a parameter) scored by dot product, written three ways in forward."""

    def __init__(self, how: str):
        super().__init__()
        self.proto = nn.Parameter(torch.randn(10, 64) * 0.1)
        self.how = how

    def forward(self, h):
        if self.how == "clamp":  # a constraint every forward applies, in both modes
            self.proto.data.clamp_(-0.5, 0.5)
        proto = self.proto
        if not self.training:
            centred = proto - proto.mean(0, keepdim=True)
            if self.how == "bug":  # re-centred in place at evaluation: training continues from it
                self.proto.data.copy_(centred)
            else:
                proto = centred  # for this call only
        return h @ proto.t()


def _run_proto(how: str) -> list:
    def build():
        model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), Prototypes(how))
        return model, torch.optim.SGD(model.parameters(), lr=0.1)

    return _train_and_evaluate(build, 4)


def test_a_parameter_written_by_an_evaluation_forward_is_named():
    findings = _run_proto("bug")
    assert slugs(findings) == ["eval-pass-changes-training"]
    assert "Sequential.2.proto" in findings[0].message and "in place" in findings[0].message


def test_a_parameter_changed_for_one_call_or_constrained_in_every_forward_is_silent():
    assert "eval-pass-changes-training" not in slugs(_run_proto("per-call"))
    assert "eval-pass-changes-training" not in slugs(_run_proto("clamp"))
