"""train/grad_norm with and without clipping, per-layer norms (log_grad_norms), the model summary."""

from __future__ import annotations

import io
import json
import math

import torch
from torch import nn
from torch.utils.data import Subset

from overt.engine.callbacks import Callback
from overt.engine.loop import Trainer
from overt.engine.model_summary import model_summary, summary_text
from overt.run.progress import PlainProgress


class Record(Callback):
    """The logged points, and the true gradient norms of every step (read here, in the test only)."""

    def __init__(self):
        self.logs, self.step_norms, self.step_logs = [], [], []

    def on_before_optimizer_step(self, trainer):
        grads = {n: p.grad.detach().clone() for n, p in trainer.model.named_parameters() if p.grad is not None}
        self.step_norms.append(grads)

    def on_log(self, trainer, logs):
        self.logs.append(dict(logs))

    def on_step_end(self, trainer, logs):
        self.step_logs.append(logs["grad_norm"])


def _run(digits, **kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    record = Record()
    Trainer(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), Subset(digits[0], range(320)),
            epochs=1, batch_size=32, log_every=3, callbacks=[record], **kw).fit()
    return record


def _norm(tensors):
    return math.sqrt(sum(float(t.double().square().sum()) for t in tensors))


def test_grad_norm_is_logged_without_clipping_and_layers_when_asked(digits):
    record = _run(digits, log_grad_norms=True)
    assert [int(r["step"]) for r in record.logs] == [3, 6, 9]
    for logged in record.logs:
        grads = record.step_norms[int(logged["step"]) - 1]
        assert math.isclose(logged["train/grad_norm"], _norm(grads.values()), rel_tol=1e-4)
        for layer in ("0", "2"):
            expected = _norm([grads[f"{layer}.weight"], grads[f"{layer}.bias"]])
            assert math.isclose(logged[f"grad_norm/{layer}"], expected, rel_tol=1e-4)
    # computed only on the logged steps: nothing is measured (nor read) on the others
    assert [n is not None for n in record.step_logs] == [s % 3 == 0 for s in range(1, 11)]


def test_per_layer_norms_stay_off_unless_asked_and_clipping_measures_every_step(digits):
    record = _run(digits, clip_grad_norm=0.05)
    assert all("train/grad_norm" in r and not any(k.startswith("grad_norm/") for k in r) for r in record.logs)
    assert all(n is not None for n in record.step_logs)  # clipping needs the norm every step
    grads = record.step_norms[2]
    assert math.isclose(record.logs[0]["train/grad_norm"], _norm(grads.values()), rel_tol=1e-4)  # pre-clip


def test_model_summary_counts_trainable_and_frozen_and_reaches_the_summary(digits):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.BatchNorm1d(32), nn.ReLU(), nn.Linear(32, 10))
    model[0].requires_grad_(False)
    info = model_summary(model)
    assert (info["parameters"], info["trainable"], info["frozen"]) == (2080 + 64 + 330, 64 + 330, 2080)
    assert info["size_mb"] == round(((2474 + 32 + 32) * 4 + 8) / 2**20, 3)  # parameters and buffers
    assert info["devices"] == ["cpu"] and info["dtypes"] == ["float32"]
    assert [row["name"] for row in info["layers"]] == ["0", "1", "3"]
    text = summary_text(info)
    assert "2,474 parameters (394 trainable, 2,080 frozen)" in text and "(2,080 frozen)" in text
    assert len(text.splitlines()) <= 16

    out = io.StringIO()
    params = [p for p in model.parameters() if p.requires_grad]
    summary = Trainer(model, torch.optim.SGD(params, lr=0.1), nn.CrossEntropyLoss(), Subset(digits[0], range(64)),
                      epochs=1, callbacks=[PlainProgress(out)]).fit()
    assert summary["model"]["frozen"] == 2080 and json.dumps(summary["model"])
    assert "model: Sequential  2,474 parameters" in out.getvalue().splitlines()[1]


def test_a_long_model_summary_stays_on_one_screen():
    model = nn.Sequential(*[nn.Linear(8, 8) for _ in range(40)])
    text = summary_text(model_summary(model))
    assert len(text.splitlines()) == 14 and "28 more layers" in text
