"""Checkpoints under the Trainer, in-process: policy, preemption signals, resume from Python."""

from __future__ import annotations

import json
import os
import signal

import pytest
import torch
from torch import nn

import overt
from overt.checkpoint import CheckpointError, resume
from overt.engine.seeding import seed_everything
from overt.errors import ConfigError

SETTINGS = dict(epochs=2, batch_size=64, accumulate=2, progress="off", tensorboard=False, monitor="val/accuracy",
                monitor_mode="max", checkpoint_every_steps=4, seed=7)


class SendAt(overt.Callback):
    """Sends ``sig`` to this process right after optimizer step ``step`` (a real signal)."""

    def __init__(self, step: int, sig: int):
        self.step, self.sig = step, sig

    def on_step_end(self, trainer, logs):
        if trainer.state.global_step == self.step:
            os.kill(os.getpid(), self.sig)


def build(digits, run_dir, callbacks=(), **overrides):
    seed_everything(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    train, val = digits
    return overt.Trainer(model, opt, nn.CrossEntropyLoss(), train, val, scheduler=sched,
                         scheduler_interval="epoch", metrics={"accuracy": overt.metrics.accuracy},
                         run_dir=run_dir, callbacks=list(callbacks), **{**SETTINGS, **overrides})


def weights(trainer):
    return {k: v.clone() for k, v in trainer.model.state_dict().items()}


@pytest.mark.parametrize("sig,settings", [(signal.SIGUSR1, {"preempt_signal": "SIGUSR1"}),
                                          (signal.SIGINT, {})])
def test_a_preemption_signal_stops_at_the_step_saves_and_resume_from_python_is_exact(
        tmp_path, digits, sig, settings):
    reference = build(digits, tmp_path / "ref", **settings)
    reference.fit()
    expected = weights(reference)

    before = signal.getsignal(sig)
    stopped = build(digits, tmp_path / "run", callbacks=[SendAt(6, sig)], **settings)
    summary = stopped.fit()
    assert signal.getsignal(sig) is before  # handlers are put back
    assert summary["status"] == "stopped" and summary["steps"] == 6
    assert summary["preempted"] == {"signal": sig.name, "exit_code": 128 + sig,
                                    "checkpoint": str(tmp_path / "run" / "checkpoints" / "step-000006")}
    from overt.cli.train import exit_status

    assert exit_status(summary) == 128 + sig

    torch.rand(10)  # whatever happens in between
    again = build(digits, tmp_path / "run", **settings)
    restored = resume(again, log=lambda m: None)
    assert restored.step == 6 and again.state.global_step == 6 and again.state.batch_index == 12
    assert again.fit()["status"] == "completed"
    final = weights(again)
    assert all(torch.equal(expected[k], final[k]) for k in expected)
    # the epoch's train loss covers the whole epoch, as without the interruption
    assert again.last_metrics == reference.last_metrics


def test_policy_writes_step_and_epoch_checkpoints_and_keeps_last_and_best(tmp_path, digits):
    trainer = build(digits, tmp_path / "run", checkpoint_every_steps=3, keep_last=2, keep_best=1,
                    checkpoint_background=False, epochs=3)
    summary = trainer.fit()
    ckpts = tmp_path / "run" / "checkpoints"
    names = sorted(p.name for p in ckpts.iterdir())
    # 12 steps per epoch (23 micro-batches / 2): steps 3, 6, 9, 12 (epoch end), ...; last two: 33, 36 (final)
    assert names[-2:] == ["step-000033", "step-000036"]
    best = [json.loads((ckpts / n / "manifest.json").read_text())["metric"] for n in names]
    scored = [m["value"] for m in best if m]
    assert len(names) <= 3 and scored and max(scored) == summary["best"]["value"]
    state = json.loads((ckpts / "step-000036" / "state.json").read_text())
    assert state["meta"]["kind"] == "epoch" and state["meta"]["epoch"] == 3 and state["meta"]["batch_index"] == 0
    assert state["meta"]["config"]["keep_last"] == 2 and "torch" in state["versions"]
    assert summary["checkpoint"]["last"] == str(ckpts / "step-000036")


def test_no_run_directory_or_checkpoint_false_writes_no_checkpoints(tmp_path, digits):
    build(digits, None).fit()
    build(digits, tmp_path / "run", checkpoint=False).fit()
    assert not (tmp_path / "run" / "checkpoints").exists()


def test_resume_refuses_a_trainer_built_differently(tmp_path, digits):
    build(digits, tmp_path / "run", epochs=1).fit()
    seed_everything(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Dropout(0.2), nn.Linear(64, 10))
    train, val = digits
    other = overt.Trainer(model, torch.optim.AdamW(model.parameters()), nn.CrossEntropyLoss(), train, val,
                          run_dir=tmp_path / "run", **{**SETTINGS, "epochs": 1})  # no scheduler
    with pytest.raises(CheckpointError, match="has scheduler state, but this Trainer has no scheduler"):
        resume(other, log=lambda m: None)


def test_an_unknown_preempt_signal_is_a_config_error(tmp_path, digits):
    with pytest.raises(ConfigError, match="unknown signal 'SIGNOPE'"):
        build(digits, tmp_path / "run", preempt_signal="SIGNOPE")


def _plain(digits, run_dir, lr, scheduler=False, **overrides):
    seed_everything(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5) if scheduler else None
    train, val = digits
    return overt.Trainer(model, opt, nn.CrossEntropyLoss(), train, val, scheduler=sched,
                         scheduler_interval="epoch", run_dir=run_dir,
                         **{**SETTINGS, "epochs": 1, "accumulate": 1, "monitor": "val/loss",
                            "monitor_mode": "min", **overrides})


def test_a_learning_rate_changed_on_resume_is_applied_not_silently_dropped(tmp_path, digits):
    _plain(digits, tmp_path / "run", lr=0.05).fit()
    same = _plain(digits, tmp_path / "run", lr=0.05, epochs=2)
    notes: list[str] = []
    resume(same, log=notes.append)
    assert same.optimizer.param_groups[0]["lr"] == 0.05
    assert not any("applied the changed optimizer setting" in n for n in notes)  # unchanged: nothing said

    lower = _plain(digits, tmp_path / "run", lr=0.001, epochs=2)
    notes.clear()
    resume(lower, log=notes.append)
    assert lower.optimizer.param_groups[0]["lr"] == 0.001
    assert lower.optimizer.state  # the momentum buffers still come from the checkpoint
    assert any("lr 0.05 -> 0.001" in n for n in notes)


def test_a_learning_rate_changed_under_a_scheduler_is_refused(tmp_path, digits):
    _plain(digits, tmp_path / "run", lr=0.05, scheduler=True).fit()
    same = _plain(digits, tmp_path / "run", lr=0.05, scheduler=True, epochs=2)
    resume(same, log=lambda _: None)  # unchanged: resumes
    with pytest.raises(CheckpointError, match="learning rate changed on resume"):
        resume(_plain(digits, tmp_path / "run", lr=0.001, scheduler=True, epochs=2), log=lambda _: None)
