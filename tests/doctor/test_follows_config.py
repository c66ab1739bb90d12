"""The probes that train do it through overt's engine with the run's config: gradient accumulation,
clipping and precision are what the real run would use.  Observed on real small runs on digits:
how often the forward pass runs, the dtype it computes in, and what clipping does to learning."""

from __future__ import annotations

import random

import numpy as np
import pytest
import torch

import overt
from overt.doctor import Verdict, probes
from overt.config import TrainConfig
from tests.doctor import helpers as h

SETTINGS = {**h.FAST, "overfit_steps": 10, "lr_find_steps": 12, "throughput_steps": 3, "throughput_time_s": 600.0}


@pytest.fixture(scope="module")
def data():
    return h.digits()


class Recorder:
    """A forward(model, batch) that counts the passes that build a graph (training micro-batches) and
    notes the mode they ran in and the dtype they computed in."""

    def __init__(self):
        self.training, self.modes, self.dtypes = 0, set(), set()

    def __call__(self, model, batch):
        x, y = batch
        out = model(x)
        if torch.is_grad_enabled():
            self.training += 1
            self.modes.add(model.training)
            self.dtypes.add(out.dtype)
        return out, y


def run(data, probe, **settings):
    model, opt, loss = h.setup()
    forward = Recorder()
    report = overt.doctor(model, opt, loss, data[0], data[1], forward=forward, progress=False, only=[probe],
                          lr_find=probe == "lr-find", **{**SETTINGS, **settings})
    return report[probe], forward


def test_accumulation_runs_every_micro_batch_of_each_optimizer_step(data):
    plain, seen_plain = run(data, "overfit-batch")
    accumulated, seen = run(data, "overfit-batch", accumulate=4)
    assert plain.evidence["steps"] == accumulated.evidence["steps"] == 10
    assert seen_plain.training == 10 and seen.training == 40 and seen.modes == {True}
    assert accumulated.evidence["accumulate"] == 4 and plain.evidence["accumulate"] == 1
    assert "4 micro-batches per optimizer step" in " ".join(accumulated.lines)
    assert not any("micro-batches" in line for line in plain.lines)


def test_the_lr_sweep_steps_once_per_accumulation_window(data):
    result, seen = run(data, "lr-find", accumulate=4)
    steps = result.evidence["steps"]  # the sweep's points (a last non-finite step is not one)
    assert steps >= 10 and seen.training % 4 == 0 and 4 * steps <= seen.training <= 4 * (steps + 1)


def test_throughput_times_optimizer_steps_of_accumulated_micro_batches(data):
    result, seen = run(data, "throughput", accumulate=3)
    assert result.verdict is not Verdict.FAIL, result.summary
    assert result.evidence["accumulate"] == 3 and result.evidence["steps"] == 3
    assert seen.training >= 3 * (3 + 2)  # measured steps + 2 warm-up steps, 3 micro-batches each


def test_bf16_autocast_is_used_by_every_probe_that_trains(data):
    for probe in ("overfit-batch", "lr-find", "throughput", "checkpoint"):
        result, seen = run(data, probe, precision="bf16")
        assert "could not run" not in result.summary, (probe, result.summary)
        assert seen.training and seen.dtypes == {torch.bfloat16}, probe
    result, seen = run(data, "overfit-batch")
    assert seen.dtypes == {torch.float32} and result.evidence["precision"] == "fp32"


def test_gradient_clipping_from_the_config_limits_what_the_overfit_probe_can_learn(data):
    """SGD memorises the batch; the same run with clip_grad_norm=1e-4 (as the config asks) barely moves."""
    model = h.mlp(dropout=0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    common = dict(progress=False, only=["overfit-batch"], **{**SETTINGS, "overfit_steps": 150})
    free = overt.doctor(model, opt, torch.nn.CrossEntropyLoss(), data[0], **common)["overfit-batch"]
    clipped = overt.doctor(model, opt, torch.nn.CrossEntropyLoss(), data[0], clip_grad_norm=1e-4,
                           **common)["overfit-batch"]
    assert free.verdict is Verdict.PASS, free.summary
    assert clipped.verdict is Verdict.FAIL and clipped.evidence["ratio"] > 0.9, clipped.summary
    assert clipped.evidence["clip_grad_norm"] == 1e-4


def test_standalone_probes_take_the_config(data):
    cfg = TrainConfig(batch_size=32, accumulate=2, precision="bf16")
    model, opt, loss = h.setup()
    forward = Recorder()
    r = probes.device_parity(model, opt, loss, [h.first_batch(data[0])], other="cpu", steps=3, config=cfg,
                             forward=forward)
    assert r.verdict is Verdict.PASS and r.evidence["steps"] == 3
    assert forward.training == 2 * 3 * 2 and forward.modes == {False}  # two runs, in eval mode (dropout off)
    forward = Recorder()
    r = probes.checkpoint_roundtrip(model, opt, h.first_batch(data[0]), loss, forward=forward, config=cfg)
    assert r.verdict is Verdict.PASS and forward.training == 2 and torch.bfloat16 in forward.dtypes


def test_the_users_objects_and_random_state_are_unchanged_with_accumulation_and_bf16(data):
    model, opt, loss = h.setup()
    before = h.fingerprint(model, opt)
    rng = (torch.get_rng_state(), random.getstate(), np.random.get_state()[1].copy())
    overt.doctor(model, opt, loss, data[0], data[1], progress=False, lr_find=True, accumulate=2, precision="bf16",
                 clip_grad_norm=1.0, **SETTINGS)
    assert h.fingerprint(model, opt) == before
    assert torch.equal(torch.get_rng_state(), rng[0]) and random.getstate() == rng[1]
    assert (np.random.get_state()[1] == rng[2]).all()
