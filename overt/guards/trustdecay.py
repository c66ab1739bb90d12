"""Where a trust-ratio optimizer's weight decay enters (LAMB's definition), for ``optimizer-off-definition``.

LAMB (You et al., 2019) adds the decay to the update it is about to scale, after the moments normalised the
gradient: ``u = m_hat / (sqrt(v_hat) + eps) + wd * w``, then ``w -= lr * phi(||w||) / ||u|| * u`` layer by layer.
Whatever the variant (bias correction or not, the weight norm clamped or not, the trust ratio skipped where the
decay is 0, the gradients clipped globally first), the moments never see the decay, so on one step from a fresh
state each tensor's update with the decay is a combination of its update without the decay and its weight:
``delta_wd = a * delta_0 + b * w``.  A decay added to the gradient, as Adam's L2 penalty is, goes through the
elementwise normalisation (``(g + wd * w) / |g + wd * w|``) and leaves that plane.  This module names the family
and measures the distance from the plane; :mod:`overt.guards.optdef` runs the probes and reports.
"""

from __future__ import annotations

import re
import torch

#: residual of the best per-tensor fit ``a * delta_0 + b * w`` (relative norm) above which the decay is not LAMB's
TRUST_FIT = 0.1

_TRUST = re.compile(r"trust", re.IGNORECASE)
_ANY_READ = re.compile(r"""group(\[[^\]]+\]|\.get\([^)]*\))""")  # a plain read of one of the group's values


def is_trust_ratio(alg: str, groups: list[dict], source: list[str] | None) -> bool:
    """True for a LAMB: a class named after it (``Lamb``, ``FusedLAMB``, ``NVLamb``...), or an Adam-family
    optimizer (its groups carry betas) whose ``step`` computes a trust ratio."""
    if "lamb" in alg:
        return True
    adam_like = any("betas" in g or "beta1" in g for g in groups)
    return adam_like and source is not None and any(_TRUST.search(line.split("#", 1)[0]) for line in source)


def _unit(v: torch.Tensor) -> torch.Tensor:
    return v / v.norm().clamp_min(1e-300)


def plane_residual(with_decay: list[torch.Tensor], without: list[torch.Tensor], start: list[torch.Tensor]
                   ) -> torch.Tensor:
    """``(residual, total)`` squared norms, summed over tensors, of each tensor's update with the decay after its
    best fit by the plane of its update without the decay and its weight (a 2-vector, on the probe's device; read
    it deferred)."""
    resid, total = [], []
    for a, b, s in zip(with_decay, without, start):
        dw, d0, w = (a - s).flatten(), (b - s).flatten(), s.flatten()
        e1 = _unit(d0)
        e2 = _unit(w - (w @ e1) * e1)
        r = dw - (dw @ e1) * e1
        r = r - (r @ e2) * e2
        resid.append((r * r).sum())
        total.append((dw * dw).sum())
    return torch.stack((torch.stack(resid).sum(), torch.stack(total).sum()))


def decay_line_index(lines: list[str], key: str) -> int | None:
    """Index of the first line of a step's source that computes with the group's decay (inline, as
    ``group["weight_decay"]``, or through a name it was read into), leaving out plain reads and ``if`` tests."""
    read = re.compile(rf"""group(\[\s*['"]{re.escape(key)}['"]\s*\]|\.get\(\s*['"]{re.escape(key)}['"][^)]*\))""")
    names: set[str] = set()
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        stripped = code.strip()
        if not stripped or stripped.startswith(("def ", "@", "if ", "elif ", "assert ", "while ")):
            continue
        m = re.match(r"\s*([\w\s,]+?)\s*=\s*([^=].*)$", code)
        if m:
            targets = [t.strip() for t in m.group(1).split(",")]
            values = [v.strip() for v in m.group(2).split(",")] if len(targets) > 1 else [m.group(2).strip()]
            if len(targets) == len(values) and all(_ANY_READ.fullmatch(v) for v in values):
                names.update(t for t, v in zip(targets, values) if read.fullmatch(v))
                continue
        if read.search(code) or any(re.search(rf"\b{re.escape(n)}\b", code) for n in names):
            return i
    return None

