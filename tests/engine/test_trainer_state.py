"""The engine's own Trainer: runs exactly the callbacks it is given, owns what a run saves
(state_dict/load_state_dict continue a run exactly), hook arguments, OOM passes through."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import Subset

from overt.engine.callbacks import Callback
from overt.engine.loop import Trainer
from overt.errors import OvertError

SETTINGS = dict(epochs=2, batch_size=64, accumulate=2, seed=3)


def _build(digits, callbacks=(), **kw):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    train = Subset(digits[0], range(640))
    return Trainer(model, opt, nn.CrossEntropyLoss(), train, scheduler=sched, scheduler_interval="epoch",
                   callbacks=list(callbacks), **{**SETTINGS, **kw})


class StopAt(Callback):
    def __init__(self, step):
        self.step, self.epoch_ends = step, []

    def on_step_end(self, trainer, logs):
        self.epoch_ends.append(logs["epoch_end"])
        if trainer.state.global_step == self.step:
            trainer.should_stop = True


def test_the_engine_trainer_runs_only_its_callbacks_and_state_dict_continues_a_run_exactly(digits):
    reference = _build(digits)
    assert list(reference.callbacks) == []  # no guards, checkpoints or progress of its own
    reference.fit()

    stop = StopAt(7)
    first = _build(digits, [stop])
    assert first.fit()["status"] == "stopped" and first.state.global_step == 7
    # 640 samples / 64 = 10 micro-batches = 5 steps per epoch: step 5 closes epoch 0
    assert stop.epoch_ends == [False, False, False, False, True, False, False]
    saved = first.state_dict()
    assert set(saved) == {"model", "optimizer", "scheduler", "precision", "train_state", "loop", "rng"}

    torch.rand(5)  # anything may draw random numbers in between
    second = _build(digits)
    second.load_state_dict(saved, source="memory")
    assert second.resumed_from == "memory" and second.state.global_step == 7
    second.fit()
    for key, value in reference.model.state_dict().items():
        assert torch.equal(value, second.model.state_dict()[key])
    assert second.last_metrics == reference.last_metrics
    # the wall time adds up over the processes of a run, and the summary says which part was this one
    summary = second.summary()
    assert summary["wall_time_s"] >= saved["loop"]["wall_time_s"] > 0
    assert 0 < summary["wall_time_since_resume_s"] <= summary["wall_time_s"]
    assert "wall_time_since_resume_s" not in reference.summary()


def test_a_restored_position_is_counted_as_the_console_counts_epochs():
    from types import SimpleNamespace

    from overt.checkpoint.callback import position

    finished = SimpleNamespace(epoch=40, global_step=1800, batch_index=0)
    assert position(finished, 40) == "after epoch 40 of 40, step 1800"  # never "epoch 41"
    inside = SimpleNamespace(epoch=3, global_step=140, batch_index=5)
    assert position(inside, 40).startswith("epoch 4 of 40, step 140, 5 micro-batches")
    assert position(SimpleNamespace(epoch=0, global_step=0, batch_index=0), 40).startswith("before the first")


def test_load_state_dict_refuses_a_trainer_with_other_parts(digits):
    saved = _build(digits).state_dict()
    del saved["scheduler"]
    with pytest.raises(OvertError, match="build the Trainer the same way"):
        _build(digits).load_state_dict(saved)


class Order(Callback):
    def __init__(self, log, name):
        self.log, self.name = log, name

    def on_summary(self, trainer, summary):
        summary.setdefault("parts", []).append(self.name)

    def on_fit_end(self, trainer, summary):
        self.log.append((self.name, list(summary["parts"])))


def test_every_on_summary_runs_before_any_on_fit_end(digits):
    log = []
    _build(digits, [Order(log, "a"), Order(log, "b")], epochs=1).fit()
    assert log == [("a", ["a", "b"]), ("b", ["a", "b"])]


def test_out_of_memory_in_forward_passes_through_as_itself_with_a_note(digits):
    error = torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB (size mismatch)")

    def forward(model, batch):
        raise error

    trainer = _build(digits, forward=forward)
    with pytest.raises(torch.cuda.OutOfMemoryError) as info:
        trainer.fit()
    assert info.value is error and not isinstance(info.value, OvertError)
    notes = "\n".join(getattr(info.value, "__notes__", []))
    assert "lower batch_size" in notes or not hasattr(error, "add_note")
