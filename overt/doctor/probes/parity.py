"""Probe 9, CPU vs accelerator parity: the same tiny run on the CPU and on the accelerator,
losses within a stated tolerance.  Skipped, with the reason, on a CPU-only machine."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from overt.config import TrainConfig
from overt.doctor.common import Forward, default_forward
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict, skipped
from overt.doctor.shortrun import Batches, EvalMode, Objects, WindowLoss, kept_rng, trainer_for

TESTS = "a tiny run on the CPU and on the accelerator from the same weights and data: losses within tolerance"
#: relative tolerance on every step's loss
RTOL = 1e-3


def accelerator() -> str | None:
    """``cuda`` or ``mps`` when present, else None."""
    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return None


def device_parity(model: nn.Module, optimizer: Any, loss_fn: Any, batches: list[Any], *,
                  forward: Forward | None = None, reference: str = "cpu", other: str | None = None,
                  other_precision: str = "fp32", steps: int = 5, rtol: float = RTOL,
                  config: TrainConfig | None = None) -> ProbeResult:
    """Probe 9 on its own: ``steps`` optimizer steps of overt's Trainer on ``reference`` and on
    ``other`` (default: the accelerator; skipped when there is none) from copies with the same
    weights, on the same batches (cycled), with ``config``'s accumulation and clipping.  The runs
    train with the model in eval mode, so dropout (whose random masks differ by device) is off;
    ``reference`` trains in fp32 and ``other_precision`` (fp32, bf16, fp16) is the autocast used on
    ``other``."""
    other = other or accelerator()
    if other is None:
        return skipped("parity", "CPU vs accelerator parity", TESTS,
                       "no accelerator on this machine (CUDA and MPS unavailable): only the CPU path was tested")
    r = ProbeResult("parity", "CPU vs accelerator parity", TESTS)
    forward = forward or default_forward
    runs = {}
    for name, device, precision in (("reference", reference, "fp32"), ("other", other, other_precision)):
        runs[name] = _losses(model, optimizer, loss_fn, batches, forward, torch.device(device), precision, steps,
                             config)
    a, b = runs["reference"], runs["other"]
    worst = max((abs(x - y) / max(abs(x), 1e-8) for x, y in zip(a, b)), default=0.0)
    label = f"{other}" + (f" ({other_precision})" if other_precision != "fp32" else "")
    r.evidence.update(reference=reference, other=label, steps=len(a), losses_reference=a, losses_other=b,
                      max_relative_diff=worst, rtol=rtol)
    r.lines.append(f"{reference}: {', '.join(f'{v:.6g}' for v in a)}")
    r.lines.append(f"{label}: {', '.join(f'{v:.6g}' for v in b)}")
    r.lines.append(f"largest relative difference {worst:.2e} (tolerance {rtol:.0e}); training ran in eval mode so "
                   f"dropout masks, which differ by device, are off")
    if len(a) == len(b) and worst <= rtol and all(math.isfinite(v) for v in a + b):
        r.summary = f"{reference} vs {label}: {len(a)} steps within {worst:.1e} (tolerance {rtol:.0e})"
        return r
    r.verdict = Verdict.FAIL
    r.summary = f"{reference} vs {label}: losses differ by up to {worst:.2e} (tolerance {rtol:.0e})"
    r.slugs.append("device-mismatch")
    r.causes += ["tensors created inside forward() on a fixed device or dtype (torch.zeros(...) without device=)",
                 "precision assumptions: reduced precision (bf16/fp16, TF32) changes the numbers beyond the tolerance",
                 "device-specific code paths (if x.is_cuda: ...)"]
    r.fix = ("create tensors with device=x.device (or register_buffer), and compare at fp32 before "
             "enabling mixed precision")
    return r


def _losses(model: nn.Module, optimizer: Any, loss_fn: Any, batches: list[Any], forward: Forward,
            device: torch.device, precision: str, steps: int, config: TrainConfig | None) -> list[float]:
    cfg = (config or TrainConfig()).model_copy(update={"device": str(device), "precision": precision})
    cycled = Batches([batches[i % len(batches)] for i in range(steps * cfg.accumulate)])
    losses = WindowLoss()
    with kept_rng():
        trainer, _ = trainer_for(Objects(model, optimizer, loss_fn, None, forward=forward, config=cfg), steps,
                                 data=cycled, callbacks=[EvalMode(), losses], scheduler=False, epochs=1)
        if any(p.device.type != device.type for p in trainer.model.parameters()):
            raise RuntimeError(f"model could not be moved to {device}")
        trainer.fit()
    return losses.losses


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return device_parity(setup.model, setup.optimizer, setup.loss_fn, setup.batches(4), forward=setup.forward,
                         steps=setup.setting("parity_steps"), config=setup.cfg)


def _risks(readiness: Any, p: ProbeResult) -> list[tuple[int, str]]:
    if p.verdict is Verdict.SKIPPED:
        return [(40, f"The accelerator path is untested: {p.reason}. Run `overt doctor` on the machine that will "
                     f"train before the long run (device-specific tensor creation and precision show up there).")]
    if p.verdict is Verdict.FAIL:
        return [(40, f"CPU and accelerator disagree ({p.summary}): results on the accelerator cannot be checked "
                     f"against the CPU.")]
    return []


PROBE = Probe("parity", "CPU vs accelerator parity", 90, _run, needs=("forward", "loss"), risks=_risks,
              settings={"parity_steps": 5})
