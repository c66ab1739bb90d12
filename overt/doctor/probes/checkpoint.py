"""Probe 7, checkpoint: save with overt's Checkpointer, load into a freshly built model, same
outputs for the same input; and exact resume -- k steps, save, resume, k steps equals 2k
uninterrupted steps, bit for bit."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable

import torch
from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Forward, default_forward, fresh, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.doctor.shortrun import (Objects, first_difference, fixed_batches, kept_rng, blame_kernels,
                                   probe_config, run, trainer_for)

TESTS_ROUNDTRIP = ("save with overt's Checkpointer, load into a freshly built model: identical outputs for the "
                   "same input")
TESTS_RESUME = "k steps + save + resume + k steps equals 2k uninterrupted steps, bit for bit"
TESTS = f"{TESTS_ROUNDTRIP}; {TESTS_RESUME}"


def _quiet(message: str) -> None:
    pass


def checkpoint_roundtrip(model: nn.Module, optimizer: Any, batch: Any, loss_fn: Any = None, *,
                         build: Callable[[], Any] | None = None, forward: Forward | None = None,
                         device: Any = None, config: TrainConfig | None = None) -> ProbeResult:
    """Probe 7a on its own.  A copy takes one optimizer step with overt's Trainer on ``batch`` (so
    the optimizer has state; ``config``'s precision, accumulation and clipping), is saved with
    :class:`overt.Checkpointer` and loaded into ``build()`` (a fresh model, or ``(model,
    optimizer)``); without ``build`` into a copy whose weights were overwritten first."""
    from overt.checkpoint import Checkpointer
    from overt.engine.device import pick_device

    r = ProbeResult("checkpoint-roundtrip", "Checkpoint round-trip", TESTS_ROUNDTRIP)
    forward = forward or default_forward
    cfg = probe_config(config, model, device)
    device = pick_device(cfg.device)
    batch = to(batch, device)
    if loss_fn is not None:
        with kept_rng():
            trainer, _ = trainer_for(Objects(model, optimizer, loss_fn, None, forward=forward, config=cfg), 1,
                                     data=fixed_batches(batch, 1, cfg), scheduler=False, epochs=1)
            trainer.fit()
        probe, opt = trainer.model, trainer.optimizer
    else:
        probe, opt, _ = fresh(model, optimizer)
        probe.to(device)
    with tempfile.TemporaryDirectory(prefix="overt-doctor-") as tmp:
        ckpt = Checkpointer(tmp, keep_last=1, log=_quiet)
        path = Path(ckpt.save(1, {"model": probe, "optimizer": opt}, meta={"probe": "doctor"}))
        files = {p.name: p.stat().st_size for p in sorted(path.iterdir()) if p.is_file()}
        target_model, target_opt, source = _target(model, optimizer, build)
        target_model.to(device)
        restored = ckpt.restore({"model": target_model, **({"optimizer": target_opt} if target_opt else {})},
                                rng=False)
    state = probe.state_dict()
    r.evidence.update(files=files, bytes=sum(files.values()), objects=sorted(restored.objects),
                      tensors=sum(isinstance(v, torch.Tensor) for v in state.values()), rebuilt_with=source)
    sizes = ", ".join(f"{k} {v / 1e3:.0f} kB" for k, v in files.items())
    r.lines.append(f"saved {', '.join(sorted(restored.objects))} + RNG states: {len(files)} files, "
                   f"{sum(files.values()) / 1e6:.2f} MB ({sizes})")
    r.lines.append(f"loaded into {source}")
    report = restored.reports.get("model")
    out_a, out_b = _outputs(probe, batch, forward), _outputs(target_model, batch, forward)
    same = out_a.shape == out_b.shape and torch.equal(out_a, out_b)
    diff = 0.0 if same else (float((out_a.float() - out_b.float()).abs().max()) if out_a.shape == out_b.shape
                             else float("inf"))
    r.evidence["max_output_diff"] = diff
    r.lines.append("outputs for the same batch after reload: "
                   + ("identical" if same else f"differ by up to {diff:.3g}"))
    opt_same = target_opt is None or _same_state(opt.state_dict(), target_opt.state_dict())
    if target_opt is not None:
        r.lines.append("optimizer state after reload: " + ("identical" if opt_same else "differs"))
    if same and opt_same:
        r.summary = (f"reloaded model gives identical outputs ({sum(files.values()) / 1e6:.2f} MB, "
                     f"{r.evidence['tensors']} tensors)")
        return r
    r.verdict = Verdict.FAIL
    r.summary = "after save and reload " + ("the outputs differ" if not same else "the optimizer state differs")
    r.causes += ["state kept outside state_dict(): layers in plain lists, tensors that are plain attributes "
                 "instead of buffers (register_buffer)", "a build that creates a different architecture",
                 "randomness in forward() in eval mode"]
    r.fix = "register every layer (nn.ModuleList) and every state tensor (register_buffer); build the same architecture"
    if report is not None and getattr(report, "missing", None):
        r.lines.append(f"keys missing when loading: {report.missing}")
    return r


def _target(model: nn.Module, optimizer: Any, build: Callable[[], Any] | None) -> tuple[nn.Module, Any, str]:
    if build is not None:
        built = build()
        if isinstance(built, tuple):
            return built[0], (built[1] if len(built) > 1 else None), "a freshly built model (the recipe's build)"
        return built, None, "a freshly built model"
    target, target_opt, _ = fresh(model, optimizer)
    with torch.no_grad():
        for t in (*target.parameters(), *target.buffers()):
            if t.is_floating_point():
                t.add_(1.0)  # so a load that silently does nothing cannot pass
    return target, None, "a copy of the model with every weight changed first (pass build= for a fresh build)"


def _outputs(model: nn.Module, batch: Any, forward: Forward) -> torch.Tensor:
    training = model.training
    model.eval()
    with torch.no_grad():
        out, _ = forward(model, batch)
    model.train(training)
    return out.detach().cpu()


def _same_state(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.shape == b.shape and torch.equal(a.cpu(), b.cpu())
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_state(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return isinstance(b, (list, tuple)) and len(a) == len(b) and all(_same_state(x, y) for x, y in zip(a, b))
    return a == b


def exact_resume(objs: Objects, *, steps: int = 3) -> ProbeResult:
    """Probe 7b on its own: overt's Trainer on copies, ``steps`` + save + resume + ``steps`` against
    ``2 * steps`` uninterrupted; losses and final weights must be equal bit for bit."""
    from overt.errors import OvertError

    r = ProbeResult("exact-resume", "Exact resume", TESTS_RESUME)
    try:
        full_losses, full_weights, first, resumed, second = _resume_pair(objs, steps)
    except OvertError as exc:
        r.verdict, r.summary = Verdict.WARN, f"cannot resume mid-epoch: {exc.what}"
        r.lines.append(str(exc))
        r.fix = exc.fix
        return r
    from overt.doctor.shortrun import weights

    if second.scheduler is not None:
        r.evidence.update(scheduler=type(second.scheduler).__name__,
                          scheduler_total_steps=getattr(second.scheduler, "total_steps", None))
    saved = sorted(first.state_objects())
    r.evidence.update(steps=2 * steps, uninterrupted=full_losses, resumed=resumed, saved=saved)
    r.lines.append(f"uninterrupted {2 * steps} steps: losses {', '.join(f'{v:.6g}' for v in full_losses)}")
    r.lines.append(f"{steps} steps, save, resume, {steps} steps: losses {', '.join(f'{v:.6g}' for v in resumed)}")
    r.lines.append(f"a Trainer checkpoint holds: {', '.join(saved)} and every RNG state")
    diff = first_difference(full_weights, weights(second.model))
    if resumed == full_losses and diff is None:
        r.summary = f"{steps}+{steps} resumed steps equal {2 * steps} uninterrupted ones bit for bit"
        return r
    where = f"first differing weight: {diff[0]} (max |diff| {diff[1]:.3g})" if diff else "losses differ"
    r.summary = f"a resumed run differs from an uninterrupted one ({where})"
    if blame_kernels(r, lambda: _resumes_exactly(objs, steps), exact="exact",
                     fix="the checkpoint itself is complete: two uninterrupted runs differ the same way"):
        return r
    r.verdict = Verdict.FAIL
    r.causes += ["state outside the checkpoint: a random augmentation with its own unseeded generator, a data "
                 "loader whose order is not a function of the seed, module attributes that are not buffers"]
    r.fix = ("give every random source a seed derived from overt's (use a Dataset, not a ready DataLoader, and "
             "torch's global generator), and keep state in buffers")
    return r


def _resume_pair(objs: Objects, steps: int) -> tuple[list[float], dict[str, torch.Tensor], Any, list[float], Any]:
    """``2 * steps`` uninterrupted against ``steps`` + save + resume + ``steps``: (uninterrupted losses,
    uninterrupted final weights, the first trainer, the resumed run's losses, the resumed trainer)."""
    from overt.checkpoint import Checkpointer
    from overt.checkpoint.callback import restore_trainer

    full_losses, full_weights, _ = run(objs, 2 * steps)
    first, stop = trainer_for(objs, steps)
    first.fit()
    with tempfile.TemporaryDirectory(prefix="overt-doctor-") as tmp:
        ckpt = Checkpointer(tmp, keep_last=1, log=_quiet)
        ckpt.save(first.state.global_step, first.state_objects())  # what `overt train` checkpoints hold
        second, stop2 = trainer_for(objs, 2 * steps)
        restore_trainer(second, ckpt.load(), log=_quiet)
        second.fit()
    return full_losses, full_weights, first, stop.losses + stop2.losses, second


def _resumes_exactly(objs: Objects, steps: int) -> bool:
    """The exact-resume comparison once more (under deterministic kernels, by :func:`kernel_noise`)."""
    from overt.doctor.shortrun import weights

    full_losses, full_weights, _, resumed, second = _resume_pair(objs, steps)
    return resumed == full_losses and first_difference(full_weights, weights(second.model)) is None


def checkpoint(model: nn.Module, optimizer: Any, loss_fn: Any, batch: Any, objs: Objects, *,
               build: Callable[[], Any] | None = None, forward: Forward | None = None, device: Any = None,
               steps: int = 3) -> ProbeResult:
    """Probe 7: the round-trip and the exact-resume check, as one result."""
    from overt.doctor.result import combine

    parts = [checkpoint_roundtrip(model, optimizer, batch, loss_fn, build=build, forward=forward, device=device,
                                  config=objs.config),
             exact_resume(objs, steps=steps)]
    return combine("checkpoint", "Checkpoint round-trip and exact resume", TESTS, parts)


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return checkpoint(setup.model, setup.optimizer, setup.loss_fn, setup.batches(1)[0], setup.objs,
                      build=setup.build, forward=setup.forward, device=setup.device, steps=setup.setting("resume_steps"))


def _section(readiness: Any, c: ProbeResult) -> list[str]:
    """The note's "What a checkpoint holds, and resuming"."""
    if c.verdict is Verdict.SKIPPED:
        return []
    rt, res = c.evidence.get("checkpoint-roundtrip", {}), c.evidence.get("exact-resume", {})
    lines = ["## What a checkpoint holds, and resuming", ""]
    if rt:
        files = rt.get("files", {})
        lines.append(f"- The round-trip checkpoint held {', '.join(rt.get('objects', []))} and the RNG states in "
                     f"{len(files)} files ({rt.get('bytes', 0) / 1e6:.2f} MB); it was loaded into "
                     f"{rt.get('rebuilt_with')}; outputs after reload differed by {rt.get('max_output_diff', 0):.3g}.")
    if res.get("saved"):
        same = res.get("uninterrupted") == res.get("resumed")
        lines.append(f"- A Trainer checkpoint holds {', '.join(res['saved'])}, every RNG state and the resolved "
                     f"config. Exact resume: {res.get('steps', 0) // 2} steps + save + resume + "
                     f"{res.get('steps', 0) // 2} steps {'equalled' if same else 'did NOT equal'} "
                     f"{res.get('steps')} uninterrupted steps bit for bit, so "
                     + ("an interrupted run (`overt resume RUN_DIR`) continues exactly." if same else
                        "a resumed run will drift from an uninterrupted one."))
    elif c.verdict is not Verdict.PASS:
        lines.append(f"- Exact resume: {c.summary}.")
    return lines + [""]


def _risks(readiness: Any, c: ProbeResult) -> list[tuple[int, str]]:
    risks = []
    size = c.evidence.get("checkpoint-roundtrip", {}).get("bytes")
    if size:
        risks.append((20, f"Checkpoints: {size / 1e6:.2f} MB each (weights + optimizer state); with the default "
                          f"keep_last=3 and keep_best=1 a run keeps up to {4 * size / 1e6:.1f} MB, and the size grows "
                          f"with the model."))
    if c.verdict is Verdict.FAIL or c.verdict is Verdict.WARN:
        risks.append((20, f"Resuming is not exact ({c.summary}): a preempted long run will not continue as it would "
                          f"have."))
    res = c.evidence.get("exact-resume", {})
    if res.get("scheduler_total_steps"):
        risks.append((90, f"Schedule: the {res['scheduler']} covers {res['scheduler_total_steps']:,} optimizer steps "
                          f"(the configured epochs); a longer run needs a new schedule, not a resume with more "
                          f"epochs."))
    return risks


PROBE = Probe("checkpoint", "Checkpoint round-trip and exact resume", 70, _run, needs=("forward", "loss"),
              section=_section, risks=_risks,
              settings={"resume_steps": 3})
