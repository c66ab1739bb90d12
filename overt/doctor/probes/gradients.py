"""Probe 4, gradient flow: one backward pass on a real batch; the gradient norm of every
layer; layers whose gradients are None, exactly zero or non-finite, named."""

from __future__ import annotations

import math
from typing import Any

from torch import nn

from overt.doctor.common import Forward, default_forward, device_of, fresh, grad_norms, param_layer, to
from overt.doctor.registry import Probe
from overt.doctor.result import ProbeResult, Verdict

TESTS = "one backward pass on a real batch: per-layer gradient norms; layers with None, zero or non-finite gradients"


def gradient_flow(model: nn.Module, loss_fn: Any, batch: Any, *, forward: Forward | None = None,
                  device: Any = None) -> ProbeResult:
    """Probe 4 on its own: forward + backward on ``batch`` through a copy of ``model`` (train mode)."""
    r = ProbeResult("gradients", "Gradient flow", TESTS)
    forward = forward or default_forward
    probe, _, _ = fresh(model)
    device = device_of(probe, device)
    probe.to(device).train()
    probe.zero_grad(set_to_none=True)
    output, target = forward(probe, to(batch, device))
    loss = loss_fn(output, target)
    if not loss.requires_grad:
        r.find("no-gradient", "the loss does not require grad: no parameter is connected to it (the output was "
               "detached, computed under no_grad, or built from .data / numpy).", fix="keep the forward pass in "
               "autograd from the parameters to the loss.", where="loss")
        r.verdict, r.summary = Verdict.FAIL, "the loss is not connected to any parameter"
        return r
    loss.backward()
    norms = grad_norms(probe)
    layers: dict[str, list[float | None]] = {}
    for name, value in norms.items():
        layers.setdefault(param_layer(name), []).append(value)
    table = []
    for layer, values in layers.items():
        present = [v for v in values if v is not None]
        total = math.sqrt(sum(v * v for v in present)) if present and all(math.isfinite(v) for v in present) else (
            float("nan") if present else None)
        table.append({"layer": layer, "norm": total, "tensors": len(values), "none": len(values) - len(present)})
    r.evidence.update(loss=float(loss.detach()), layers=table)
    r.curves["grad_norms"] = [(t["layer"], t["norm"]) for t in table]
    none = [n for n, v in norms.items() if v is None]
    zero = [n for n, v in norms.items() if v == 0.0]
    bad = [n for n, v in norms.items() if v is not None and not math.isfinite(v)]
    for t in table:
        norm = "None" if t["norm"] is None else f"{t['norm']:.3g}"
        partial = f" ({t['none']} tensor(s) without grad)" if t["none"] and t["norm"] is not None else ""
        r.lines.append(f"`{t['layer']}`: grad norm {norm}{partial}")
    problems, warnings = [], []
    if bad:
        r.find("non-finite", f"{len(bad)} parameter(s) have NaN/inf gradients after one backward pass "
               f"({', '.join(bad[:5])}): one step would destroy those weights.", fix="check the inputs for NaN/inf, "
               "log/sqrt/division of zero in forward, and the loss's inputs.", where=", ".join(bad[:5]))
        problems.append(f"{len(bad)} tensor(s) with NaN/inf gradients")
    if none:
        layer_names = sorted({param_layer(n) for n in none})
        r.find("no-gradient", f"{len(none)} trainable tensor(s) get no gradient ({', '.join(none[:6])}): the "
               f"layer{'s' * (len(layer_names) > 1)} {', '.join(layer_names[:6])} "
               f"{'are' if len(layer_names) > 1 else 'is'} not on the path from the inputs to the loss (unused in "
               "forward, a detached tensor, or .data).", fix="use the layer in forward(), or freeze it "
               "(requires_grad_(False)) if that is intended.", where=", ".join(layer_names[:6]))
        (problems if len(none) == len(norms) else warnings).append(f"no gradient for {len(none)} tensor(s) "
                                                                   f"in {', '.join(layer_names[:4])}")
    if zero:
        warnings.append(f"exactly zero gradient for {len(zero)} tensor(s) ({', '.join(zero[:4])})")
        r.slugs.append("dead-activations")
        r.causes.append("a zero gradient on a real batch: dead ReLUs, a saturated activation, or a multiplication by a "
                        "constant zero")
    if problems:
        r.verdict, r.summary = Verdict.FAIL, "; ".join(problems + warnings)
    elif warnings:
        r.verdict, r.summary = Verdict.WARN, "; ".join(warnings)
    else:
        finite = [t["norm"] for t in table if t["norm"] is not None]
        r.summary = (f"{len(norms)} tensors in {len(table)} layers all get finite non-zero gradients "
                     f"(layer norms {min(finite):.2g} to {max(finite):.2g})")
    if r.verdict is not Verdict.PASS:
        r.causes.append("detached tensors, unused layers, .data tricks, or non-finite values in the forward pass")
        r.fix = r.fix or "see the findings: each names the parameters and the fix"
    return r


# -- the probe, as the doctor runs it -------------------------------------------------------------

def _run(setup: Any) -> ProbeResult:
    return gradient_flow(setup.model, setup.loss_fn, setup.batches(1)[0], forward=setup.forward, device=setup.device)


def _risks(readiness: Any, r: ProbeResult) -> list[tuple[int, str]]:
    norms = [row["norm"] for row in r.evidence.get("layers") or [] if row.get("norm")]
    if len(norms) > 1 and max(norms) / max(min(norms), 1e-30) > 100:
        return [(70, f"Gradient norms span {max(norms) / min(norms):.0f}x across layers ({min(norms):.2g} to "
                     f"{max(norms):.2g}) at initialisation; deeper or longer training can turn this into "
                     f"vanishing or exploding gradients: consider normalisation layers or clipping.")]
    return []


PROBE = Probe("gradients", "Gradient flow", 40, _run, needs=("forward", "loss"), risks=_risks)
