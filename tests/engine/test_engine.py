"""The engine on real small runs: modes, metrics, seeds, precision, devices, errors."""

from __future__ import annotations

import dataclasses
from collections import namedtuple
from pathlib import Path

import pytest
import torch
from torch import nn
from torch.utils.data import Subset, TensorDataset

import overt
from overt.engine.device import batch_size_of, move_to_device
from overt.engine.metrics import accuracy
from overt.errors import ConfigError, OvertError


class BNNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Dropout(0.3))
        self.frozen = nn.BatchNorm1d(32)  # deliberately kept in eval mode by the user
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.frozen(self.body(x)))


def _trainer(digits, **kw):
    torch.manual_seed(0)
    model = BNNet()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    kw.setdefault("progress", "off")
    return overt.Trainer(model, opt, nn.CrossEntropyLoss(), digits[0], digits[1],
                         metrics={"accuracy": accuracy}, **kw)


def test_validation_restores_train_mode_and_leaves_batchnorm_stats_alone(digits):
    trainer = _trainer(digits, epochs=1)
    trainer.fit()
    model = trainer.model
    model.train()
    model.frozen.eval()
    bn = model.body[1]
    before = (bn.running_mean.clone(), bn.running_var.clone(), int(bn.num_batches_tracked))
    metrics = trainer.validate()
    assert model.training and model.body.training and bn.training
    assert not model.frozen.training, "a submodule the user froze in eval mode must stay in eval"
    assert torch.equal(bn.running_mean, before[0]) and torch.equal(bn.running_var, before[1])
    assert int(bn.num_batches_tracked) == before[2]
    assert set(metrics) == {"val/loss", "val/accuracy"}


def test_validation_metrics_are_averaged_over_samples_not_batches(digits):
    val = Subset(digits[1], range(10))  # batches of 4, 4, 2
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    trainer = overt.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                            digits[0], val, val_batch_size=4, metrics={"accuracy": accuracy}, progress="off")
    metrics = trainer.validate()
    x = torch.stack([val[i][0] for i in range(10)])
    y = torch.stack([val[i][1] for i in range(10)])
    with torch.no_grad():
        out = model(x)
    assert metrics["val/loss"] == pytest.approx(nn.functional.cross_entropy(out, y).item(), rel=1e-5)
    assert metrics["val/accuracy"] == pytest.approx((out.argmax(1) == y).float().mean().item(), rel=1e-6)


def test_same_seed_same_metrics(digits):
    a = _trainer(digits, epochs=2, seed=7).fit()
    b = _trainer(digits, epochs=2, seed=7).fit()
    c = _trainer(digits, epochs=2, seed=8).fit()
    assert a["final"] == b["final"]
    assert a["final"] != c["final"]


def test_same_seed_same_metrics_with_loader_workers(digits):
    a = _trainer(digits, epochs=1, seed=1, num_workers=2).fit()
    b = _trainer(digits, epochs=1, seed=1, num_workers=2).fit()
    assert a["final"] == b["final"]


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_reduced_precision_runs_on_cpu(digits, precision):
    summary = _trainer(digits, epochs=2, precision=precision, clip_grad_norm=1.0).fit()
    assert summary["precision"] == precision
    assert summary["final"]["val/accuracy"] > 0.6


def test_fp16_scaler_skipped_steps_are_counted(digits):
    trainer = _trainer(digits, epochs=3, precision="fp16")
    # an absurd initial scale overflows the fp16 gradients: the scaler skips and halves until it fits
    trainer.precision.scaler = torch.amp.GradScaler("cpu", init_scale=2.0**40)
    summary = trainer.fit()
    halvings = 40 - int(torch.log2(torch.tensor(trainer.precision.scaler.get_scale())).item())
    assert summary["skipped_steps"] == halvings > 10
    assert summary["steps"] > summary["skipped_steps"]  # later steps did update


def test_auto_precision_is_fp32_on_cpu(digits):
    assert _trainer(digits, epochs=1).precision.mode == "fp32"


def test_gradient_clipping_logs_pre_clip_norm(digits):
    logs = []

    class Grab(overt.Callback):
        def on_log(self, trainer, values):
            logs.append(values)

    _trainer(digits, epochs=1, clip_grad_norm=0.01, log_every=5, callbacks=[Grab()]).fit()
    assert logs and all(v["train/grad_norm"] > 0.01 for v in logs)  # pre-clip norms exceed the threshold


def test_scheduler_requires_explicit_cadence(digits):
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with pytest.raises(ConfigError, match="scheduler_interval"):
        overt.Trainer(model, opt, nn.CrossEntropyLoss(), digits[0], scheduler=torch.optim.lr_scheduler.StepLR(opt, 1))


@pytest.mark.parametrize("interval,expected_steps", [("step", 2 * 23), ("epoch", 2)])
def test_scheduler_steps_at_its_cadence(digits, interval, expected_steps):
    torch.manual_seed(0)
    model = nn.Linear(64, 10)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda i: 1.0)
    overt.fit(model, opt, nn.CrossEntropyLoss(), digits[0], epochs=2, scheduler=sched,
              scheduler_interval=interval, progress="off")  # 1437 samples / 64 = 23 batches
    assert sched.last_epoch == expected_steps


def test_labels_that_do_not_fit_the_model_name_the_batch(digits):
    x, y = digits[0].tensors
    torch.manual_seed(0)
    model = nn.Linear(64, 8)  # 8 outputs, labels go to 9
    with pytest.raises(OvertError) as info:
        overt.fit(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                  TensorDataset(x, y), progress="off", guards=False)
    text = str(info.value)
    assert "epoch 0, batch" in text and "outside [0, number of model outputs)" in text


def test_unknown_trainer_argument_is_rejected_with_a_suggestion(digits):
    model = nn.Linear(64, 10)
    with pytest.raises(ConfigError, match="did you mean epochs"):
        overt.Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), digits[0], epoch=3)


def test_monitor_typo_is_an_error(digits):
    with pytest.raises(ConfigError, match="monitor='val/acc'"):
        _trainer(digits, epochs=1, monitor="val/acc").fit()


def test_move_to_device_handles_nested_structures():
    @dataclasses.dataclass
    class Batch:
        x: torch.Tensor
        meta: dict

    Pair = namedtuple("Pair", "a b")
    batch = {"b": Batch(torch.ones(3, 2), {"ids": [torch.arange(3), "keep"]}), "p": Pair(torch.zeros(3), 5)}
    moved = move_to_device(batch, torch.device("meta"))
    assert moved["b"].x.device.type == "meta"
    assert moved["b"].meta["ids"][0].device.type == "meta" and moved["b"].meta["ids"][1] == "keep"
    assert isinstance(moved["p"], Pair) and moved["p"].a.device.type == "meta" and moved["p"].b == 5
    assert batch_size_of(batch) == 3


def test_compile_option_trains(digits):
    pytest.importorskip("torch._dynamo")
    if any(ch.isspace() for ch in str(Path(torch.__file__).parent)):
        pytest.skip("torch is installed under a path with a space: inductor's C++ build cannot link there "
                    "(torch's limitation; the engine's error says so)")
    summary = _trainer(digits, epochs=1, compile=True).fit()
    assert summary["final"]["val/accuracy"] > 0.5
