"""The accelerator path on a real GPU: precision, compile, activation checkpointing, exact resume,
pinned memory, and no host-device synchronisation between log points (engine, ``overt.guard``,
``overt run``).  Skipped where CUDA is absent (tests/cuda/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest
import torch

import overt
from tests.cuda.helpers import REPO, SyncLog, StepMarks, gpt_recipe, gpt_trainer, unexpected_syncs


def weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


# -- no host-device synchronisation between log points ------------------------------------------------

@pytest.mark.parametrize("precision", ["fp32", "bf16", "fp16"])
def test_an_epoch_with_default_guards_synchronises_only_at_log_points_and_checked_steps(cuda, shakespeare,
                                                                                        precision):
    """A whole epoch (with validation) under sync debug mode: "warn" counts every synchronisation,
    "error" is on for the steps that must have none (neither logged nor checked by the guards).
    fp16 uses the recipe's fused AdamW, which takes GradScaler's inf check on the device."""
    log = SyncLog()
    marks = StepMarks(log, strict=True)
    trainer = gpt_trainer(shakespeare, callbacks=[marks], precision=precision, epochs=1, log_every=10)
    with log:
        trainer.fit()
    steps = trainer.state.global_step
    assert steps >= 30 and trainer.steps_per_epoch == steps
    bad = unexpected_syncs(log, marks, trainer.steps_per_epoch)
    quiet = [s for s in range(1, steps + 1) if s not in marks.checked and s not in marks.logged]
    print(f"{precision}: {steps} steps, {len(marks.logged)} logged, {len(marks.checked)} checked by the guards, "
          f"{len(quiet)} quiet; synchronisations by step: {dict(sorted(log.by_step.items(), key=str))}")
    assert len(quiet) >= steps // 2
    assert not bad, f"synchronisations between log points: {bad}"


def test_fp16_with_a_plain_adamw_costs_one_read_per_step_in_gradscaler_and_it_is_counted(cuda, shakespeare):
    """torch's GradScaler.step reads found_inf on the host for optimizers that cannot take it on
    the device (not fused): one synchronisation per step that overt cannot remove.  Measured here
    (and printed), so that the docs can say it with the number."""
    log = SyncLog()
    marks = StepMarks(log)
    trainer = gpt_trainer(shakespeare, callbacks=[marks], precision="fp16", fused=False, epochs=1, log_every=10)
    with log:
        trainer.fit()
    bad = unexpected_syncs(log, marks, trainer.steps_per_epoch)
    print(f"fp16 + AdamW(foreach): {len(bad)} of {trainer.state.global_step} steps synchronise outside log "
          f"points; first: {next(iter(bad.items()), None)}")
    assert len(bad) >= 1  # if torch ever stops reading found_inf on the host, this test tells us


def test_overt_guard_in_a_hand_written_loop_synchronises_only_on_checked_steps(cuda, shakespeare):
    recipe, cfg = gpt_recipe(shakespeare)
    model, opt, loss_fn = recipe.model.to(cuda), recipe.optimizer, recipe.loss_fn
    loader = torch.utils.data.DataLoader(recipe.train_data, batch_size=32, shuffle=True, drop_last=True,
                                         pin_memory=True)
    log = SyncLog()
    guard = overt.guard(model, opt, ignore=["effective-batch-size"])
    session = guard.session
    checked, logged = set(), set()
    with log:
        losses = []
        for step, (x, y) in enumerate(loader, start=1):
            log.at(step)
            if session.armed or session.step < session.options.warmup_steps:
                checked.add(step)
            x, y = x.to(cuda, non_blocking=True), y.to(cuda, non_blocking=True)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                loss = loss_fn(model(x), y)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            losses.append(loss.detach())
            if step % 10 == 0:
                logged.add(step)
                _ = torch.stack(losses).mean().item()  # the loop's own log point
                losses = []
            log.at(("after", step))
    findings = guard.report()
    marks = StepMarks()
    marks.checked, marks.logged = checked, logged
    bad = unexpected_syncs(log, marks, steps_per_epoch=len(loader))
    print(f"overt.guard: {len(loader)} steps, {len(checked)} checked; synchronisations: {log.by_step}")
    assert not [f for f in findings if f.severity == "error"]
    assert not bad, f"synchronisations between log points: {bad}"


RUN_SCRIPT = textwrap.dedent('''
    import json, sys, warnings
    import torch
    from torch import nn
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = nn.Sequential(nn.Linear(256, 1024), nn.GELU(), nn.Dropout(0.1), nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, fused=True)
    x = torch.randn(8192, 256)
    y = (x[:, :10].argmax(1))
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=64, shuffle=True,
                                         pin_memory=True, drop_last=True)
    by_step = {}
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        torch.cuda.set_sync_debug_mode("warn")
        kept = []
        for step, (xb, yb) in enumerate(loader, start=1):
            xb, yb = xb.to(dev, non_blocking=True), yb.to(dev, non_blocking=True)
            loss = nn.functional.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
            kept.append(loss.detach())
            if step % 25 == 0:
                _ = torch.stack(kept).mean().item()
                kept = []
            n = sum("synchronizing CUDA operation" in str(r.message) for r in rec)
            rec.clear()
            if n:
                by_step[step] = n
        torch.cuda.set_sync_debug_mode("default")
    json.dump({"steps": len(loader), "by_step": by_step}, open(sys.argv[1], "w"))
''')


def test_overt_run_adds_synchronisations_only_on_its_checked_steps(cuda, tmp_path):
    """An unmodified script under ``overt run``: the steps that synchronise are the script's own
    log points, the guards' warm-up and their sampled checks (one in ``check_every`` = 50 or
    fewer), nothing else."""
    script = tmp_path / "train.py"
    script.write_text(RUN_SCRIPT)
    out = tmp_path / "syncs.json"
    proc = subprocess.run([sys.executable, "-m", "overt", "run", str(script), str(out)], cwd=tmp_path,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    steps, by_step = result["steps"], {int(k): v for k, v in result["by_step"].items()}
    own = {s for s in range(25, steps + 1, 25)}
    extra = sorted(s for s in by_step if s not in own)
    print(f"overt run: {steps} steps; synchronising steps beyond the script's own log points: {extra}")
    warmup = [s for s in extra if s <= 5 + 1]
    sampled = [s for s in extra if s > 6]
    assert len(sampled) <= steps // 50 + 2, extra
    assert len(warmup) <= 6


# -- precision --------------------------------------------------------------------------------------

class GradProbe(overt.Callback):
    """Before each optimizer step (after the engine unscaled): the true total gradient norm and the
    loss scale, read on the host (a test may synchronise)."""

    def __init__(self, poison_at: int | None = None):
        self.norms, self.scales, self.poison_at = [], [], poison_at

    def on_after_backward(self, trainer, loss):
        if trainer.state.global_step + 1 == self.poison_at:  # before the engine unscales (and finds it)
            next(p.grad for p in trainer._params if p.grad is not None).fill_(float("inf"))  # an overflow

    def on_before_optimizer_step(self, trainer):
        grads = [p.grad for p in trainer._params if p.grad is not None]
        self.norms.append(torch.linalg.vector_norm(torch.stack([torch.linalg.vector_norm(g.float())
                                                                for g in grads])).item())
        self.scales.append(trainer.precision.scaler.get_scale())


def test_fp16_unscales_before_clipping_and_counts_skipped_steps_on_the_device(cuda, shakespeare):
    probe = GradProbe(poison_at=7)
    logs = []

    class Logs(overt.Callback):
        def on_log(self, trainer, values):
            logs.append(dict(values))

    trainer = gpt_trainer(shakespeare, callbacks=[probe, Logs()], engine=True, precision="fp16", epochs=1,
                          log_every=1, limit_chars=20000)
    summary = trainer.fit()
    assert summary["precision"] == "fp16"
    # unscaled: the norm the clipping sees is the true one, thousands of times below the loss scale
    finite = [n for n in probe.norms if n == n and n != float("inf")]
    assert finite and max(finite) < 100 and min(probe.scales) >= 1.0
    assert all(abs(log["train/grad_norm"] - n) <= 1e-3 * max(n, 1) for log, n in zip(logs, probe.norms)
               if n == n and n != float("inf"))
    # every step the scale backed off was a skipped step; the poisoned one among them
    skipped = sum(1 for a, b in zip(probe.scales, probe.scales[1:] + [trainer.precision.scaler.get_scale()])
                  if b < a)
    assert skipped >= 1 and summary["skipped_steps"] == skipped
    assert all(torch.isfinite(p).all() for p in trainer.model.parameters())


def test_bf16_autocast_trains_with_fp32_weights(cuda, shakespeare):
    trainer = gpt_trainer(shakespeare, engine=True, precision="bf16", epochs=2)
    summary = trainer.fit()
    assert summary["precision"] == "bf16"
    assert all(p.dtype == torch.float32 for p in trainer.model.parameters())
    seen = []
    handle = trainer.model.blocks[0].qkv.register_forward_hook(lambda m, i, o: seen.append(o.dtype))
    with trainer.precision.autocast():
        trainer.model(torch.zeros(2, 8, dtype=torch.int64, device=cuda))
    handle.remove()
    assert seen == [torch.bfloat16]
    assert summary["final"]["val/loss"] < 3.3  # ln(vocab ~ 60) = 4.1 at the start


def test_auto_precision_is_bf16_on_a_gpu_that_has_it(cuda, shakespeare):
    trainer = gpt_trainer(shakespeare, engine=True, epochs=1, limit_chars=20000)
    assert trainer.precision.mode == ("bf16" if torch.cuda.is_bf16_supported() else "fp32")


# -- compile ----------------------------------------------------------------------------------------

def graphs() -> int:
    from torch._dynamo.utils import counters

    return int(counters["stats"]["unique_graphs"])


@pytest.mark.parametrize("guards", [False, True])
def test_compile_trains_and_validates_without_recompiling_after_the_first_epoch(cuda, shakespeare, guards):
    """compile=true: the training and validation forwards compile in the first epoch; later epochs
    (guards arming and disarming their hooks included) compile nothing new."""
    import torch._dynamo

    torch._dynamo.reset()
    counts = []

    class Count(overt.Callback):
        def on_epoch_end(self, trainer, epoch, metrics):
            counts.append(graphs())

    trainer = gpt_trainer(shakespeare, callbacks=[Count()], engine=not guards, compile=True, epochs=3,
                          precision="bf16", limit_chars=30000)
    summary = trainer.fit()
    print(f"compile (guards {'on' if guards else 'off'}): graphs compiled after each epoch: {counts}")
    assert summary["final"]["val/loss"] < 3.5
    assert counts[0] >= 1 and counts[-1] == counts[0], counts
    eager = gpt_trainer(shakespeare, engine=True, compile=False, epochs=3, precision="bf16", limit_chars=30000)
    assert abs(eager.fit()["final"]["val/loss"] - summary["final"]["val/loss"]) < 0.1


# -- activation checkpointing -----------------------------------------------------------------------

def test_activation_checkpointing_saves_memory_and_keeps_the_gradients(cuda, shakespeare):
    def peak(targets):
        recipe, cfg = gpt_recipe(shakespeare, layers=6, embed=256, heads=4, context=256, dropout=0.0)
        model = recipe.model.to(cuda)
        if targets:
            from overt.engine.memory import apply_activation_checkpointing

            apply_activation_checkpointing(model, targets)
        x = torch.randint(0, len(recipe.meta["vocab"]), (32, 256), device=cuda)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        recipe.loss_fn(model(x), x).backward()
        torch.cuda.synchronize()
        grads = torch.cat([p.grad.flatten() for p in model.parameters()])
        return torch.cuda.max_memory_allocated() - base, grads

    plain, g_plain = peak([])
    checkpointed, g_ckpt = peak(["Block"])
    print(f"activation checkpointing: peak {plain / 2**20:.1f} MiB -> {checkpointed / 2**20:.1f} MiB")
    assert checkpointed < 0.7 * plain
    assert torch.allclose(g_plain, g_ckpt, rtol=1e-3, atol=1e-5)  # attention kernels may sum in another order


# -- exact resume on CUDA ---------------------------------------------------------------------------

class StopAt(overt.Callback):
    def __init__(self, step):
        self.step = step

    def on_step_end(self, trainer, logs):
        if trainer.state.global_step == self.step:
            trainer.should_stop = True  # what a preemption signal does


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_stop_and_resume_on_cuda_with_dropout_is_bit_identical(cuda, shakespeare, tmp_path, precision):
    from overt.checkpoint import resume

    settings = dict(precision=precision, epochs=2, limit_chars=30000, checkpoint_every_steps=5, dropout=0.2)
    reference = gpt_trainer(shakespeare, run_dir=tmp_path / "ref", **settings)
    reference.fit()
    expected = weights(reference.model)

    stopped = gpt_trainer(shakespeare, run_dir=tmp_path / "run", callbacks=[StopAt(7)], **settings)
    assert stopped.fit()["status"] == "stopped"
    torch.rand(100, device=cuda)  # the CUDA generator moves on in between
    again = gpt_trainer(shakespeare, run_dir=tmp_path / "run", **settings)
    restored = resume(again, log=lambda m: None)
    assert restored.step == 7
    again.fit()
    final = weights(again.model)
    different = [k for k in expected if not torch.equal(expected[k], final[k])]
    assert not different, f"{len(different)} tensors differ after resume, e.g. {different[:3]}"


def test_kill_and_resume_from_the_command_line_on_cuda_is_bit_identical(cuda, shakespeare, tmp_path):
    """A real SIGKILL mid-epoch (after a checkpoint), then ``overt resume``: the final weights equal
    an uninterrupted run's, bit for bit (same device, same process count)."""
    import os
    import signal
    import time

    from safetensors.torch import load_file

    # the whole text: ~980 steps, so the kill (polled every 50 ms) lands well before the end
    args = [f"text={shakespeare}", "layers=2", "heads=2", "embed=64", "context=64", "stride=32",
            "batch_size=32", "dropout=0.2", "epochs=1", "device=cuda", "progress=off", "tensorboard=false",
            "checkpoint_every_steps=200", "checkpoint_background=false", "ignore=[effective-batch-size]"]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO), os.environ.get("PYTHONPATH")]))}
    ref = subprocess.run([sys.executable, "-m", "overt", "train", "gpt", *args, f"run_dir={tmp_path / 'ref'}"],
                         capture_output=True, text=True, timeout=300, env=env)
    assert ref.returncode == 0, ref.stderr[-3000:]
    run = tmp_path / "run"
    proc = subprocess.Popen([sys.executable, "-m", "overt", "train", "gpt", *args, f"run_dir={run}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and not (run / "checkpoints" / "step-000200").is_dir():
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.wait(timeout=60)
    assert (run / "checkpoints" / "step-000200").is_dir()
    assert not (run / "model.safetensors").exists()  # killed before the end
    again = subprocess.run([sys.executable, "-m", "overt", "resume", str(run)], capture_output=True, text=True,
                           timeout=300, env=env)
    assert again.returncode == 0, again.stderr[-3000:]
    a, b = load_file(tmp_path / "ref" / "model.safetensors"), load_file(run / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


# -- pinned memory, non-blocking copies --------------------------------------------------------------

def test_loaders_pin_memory_and_batches_arrive_without_a_blocking_copy(cuda, shakespeare):
    pinned = []

    class Look(overt.Callback):
        def on_batch_start(self, trainer, batch, index):
            pinned.append(all(t.is_pinned() for t in batch))

    trainer = gpt_trainer(shakespeare, callbacks=[Look()], engine=True, epochs=1, limit_chars=20000)
    assert trainer.train_loader.pin_memory and trainer.val_loader.pin_memory
    from overt.engine.device import move_to_device

    batch = next(iter(trainer.train_loader))
    torch.cuda.set_sync_debug_mode("error")  # a blocking host-to-device copy would raise here
    try:
        moved = move_to_device(batch, cuda, non_blocking=True)
    finally:
        torch.cuda.set_sync_debug_mode("default")
    assert all(t.device.type == "cuda" for t in moved)
    trainer.fit()
    assert pinned and all(pinned)


# -- the doctor's parity probe ----------------------------------------------------------------------

def test_doctor_parity_probe_passes_on_the_gpu(cuda, tmp_path):
    proc = subprocess.run([sys.executable, "-m", "overt", "doctor", "digits", f"runs_root={tmp_path}"],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path)
    text = proc.stdout + proc.stderr
    parity = [line for line in text.splitlines() if "parity" in line.lower()]
    print("\n".join(parity))
    assert parity and "PASS" in parity[0], text[-3000:]
