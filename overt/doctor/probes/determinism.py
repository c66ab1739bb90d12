"""Probe 8, determinism: two short runs of overt's Trainer with the same seed give identical
losses and weights."""

from __future__ import annotations

from typing import Any

from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict
from overt.doctor.shortrun import Objects, blame_kernels, first_difference, run

TESTS = "two short runs with the same seed give identical losses and weights"


def determinism(objs: Objects, *, steps: int = 5) -> ProbeResult:
    """Probe 8 on its own: ``steps`` optimizer steps twice from the same weights and seed."""
    r = ProbeResult("determinism", "Determinism", TESTS)
    losses_a, weights_a, trainer = run(objs, steps)
    losses_b, weights_b, _ = run(objs, steps)
    seed = trainer.config.seed
    r.evidence.update(seed=seed, steps=len(losses_a), run_a=losses_a, run_b=losses_b, device=str(trainer.device))
    r.lines.append(f"seed {seed}, {len(losses_a)} steps on {trainer.device}, run 1: "
                   f"{', '.join(f'{v:.6g}' for v in losses_a)}")
    r.lines.append(f"run 2: {', '.join(f'{v:.6g}' for v in losses_b)}")
    diff = first_difference(weights_a, weights_b)
    if losses_a == losses_b and diff is None:
        r.summary = f"two runs with seed {seed}: {len(losses_a)} identical losses, identical weights"
        return r
    step = next((i + 1 for i, (a, b) in enumerate(zip(losses_a, losses_b)) if a != b), None)
    r.summary = (f"two runs with seed {seed} differ" + (f" from step {step}" if step else "")
                 + (f" (weight {diff[0]} by up to {diff[1]:.3g})" if diff else ""))
    r.evidence["first_differing_step"] = step
    if blame_kernels(r, lambda: _same_twice(objs, steps), exact="identical",
                     fix="otherwise expect runs with one seed to differ by rounding"):
        return r
    r.verdict = Verdict.FAIL
    r.causes += ["a random source overt does not seed: a generator created inside the dataset or model "
                 "(np.random.default_rng() / torch.Generator() without a seed), time-based randomness",
                 "non-deterministic kernels on the accelerator (scatter/index_add, some convolutions)"]
    r.fix = ("derive every generator's seed from the run seed; on CUDA try "
             "torch.use_deterministic_algorithms(True) to find the non-deterministic operation")
    return r


def _same_twice(objs: Objects, steps: int) -> bool:
    losses_a, weights_a, _ = run(objs, steps)
    losses_b, weights_b, _ = run(objs, steps)
    return losses_a == losses_b and first_difference(weights_a, weights_b) is None


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return determinism(setup.objs, steps=setup.setting("determinism_steps"))


def _risks(readiness: Any, r: ProbeResult) -> list[tuple[int, str]]:
    if r.verdict is not Verdict.FAIL:
        return []
    return [(30, f"Runs are not reproducible ({r.summary}): comparisons between runs of a longer experiment mix "
                 f"the effect of a change with noise.")]


PROBE = Probe("determinism", "Determinism", 80, _run, needs=("forward", "loss"), risks=_risks,
              settings={"determinism_steps": 5})
