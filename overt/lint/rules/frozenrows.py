"""Part of a gradient zeroed to freeze it, under an optimizer whose weight decay moves it anyway
(OVT126 ``frozen-params-moved``, the lint face of the guard of the same slug).

In one training loop, between ``backward()`` and the optimizer's ``step()``, part of a gradient is
set to zero -- ``emb.weight.grad[keep] = 0``, ``grad.data[idx, :] = grad.data[idx, :].fill_(0)``,
``p.grad.masked_fill_(m, 0)``, ``p.grad[idx].zero_()`` -- to keep those elements fixed, while the
optimizer stepped there is built in the file with weight decay: ``AdamW`` (0.01 unless
``weight_decay=0``) or any ``torch.optim`` optimizer given a non-zero ``weight_decay``.  Decay is applied whatever the gradient, so the "frozen"
values shrink at every step (huggingface/diffusers#1009, textual inversion's embedding rows).

Silent when the loop writes the values back after the step (an assignment into the same tensor,
``.data[...] =``, ``.copy_(...)``: the usual fix), when the whole gradient is reset
(``p.grad.zero_()``, ``p.grad = None``: a zero_grad), when the optimizer is not found in the file or
is built without decay, and for momentum alone (zero from the first step, masked elements build no
momentum).  ``p.grad.mul_(mask)`` is left alone: it is how pruning keeps pruned weights at zero, and
weight decay does not move a zero (the guard sees whether the values move).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import events
from overt.lint.analysis.units import loop_units
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_PARTIAL_CALLS = ("masked_fill_", "index_fill_")


def _zero_value(node: ast.expr) -> bool:
    """``0``, or ``<...>.fill_(0)`` / ``<...>.zero_()`` (diffusers' textual inversion:
    ``grad.data[idx, :] = grad.data[idx, :].fill_(0)``)."""
    if isinstance(node, ast.Constant):
        return node.value == 0 and not isinstance(node.value, bool)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        if node.func.attr == "zero_":
            return True
        return node.func.attr == "fill_" and bool(node.args) and isinstance(node.args[0], ast.Constant) \
            and node.args[0].value == 0
    return False


def _grad_owner(ix: FileIndex, node: ast.expr) -> ast.expr | None:
    """``X`` of ``X.grad`` / ``X.grad.data`` (also through a name assigned ``X.grad`` once), else None."""
    if isinstance(node, ast.Attribute) and node.attr == "data":
        node = node.value
    if isinstance(node, ast.Name):
        values = ix.assigns.get(node.id, [])
        if len(values) == 1:
            node = values[0]
    if isinstance(node, ast.Attribute) and node.attr == "grad":
        return node.value
    return None


def _partial_zeroing(ix: FileIndex, node: ast.AST) -> ast.expr | None:
    """The parameter whose gradient ``node`` zeroes in part, or None."""
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript) \
            and _zero_value(node.value):
        return _grad_owner(ix, node.targets[0].value)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        recv, attr = node.func.value, node.func.attr
        if attr in _PARTIAL_CALLS:
            if not (len(node.args) >= 2 and isinstance(node.args[-1], ast.Constant) and node.args[-1].value == 0):
                return None
            return _grad_owner(ix, recv)
        if attr in ("zero_", "fill_") and isinstance(recv, ast.Subscript):
            if attr == "fill_" and not (node.args and isinstance(node.args[0], ast.Constant)
                                        and node.args[0].value == 0):
                return None
            return _grad_owner(ix, recv.value)
    return None


def _decay(ix: FileIndex, opt: str | None) -> str | None:
    """How the optimizer named ``opt`` decays its weights ("AdamW's default weight_decay=0.01",
    "weight_decay=0.1"), or None (not found, no decay, or not certain)."""
    values = ix.assigns.get(opt or "", [])
    if len(values) != 1 or not isinstance(values[0], ast.Call):
        return None
    call = values[0]
    q = ix.qualname(call.func) or dotted(call.func) or ""
    if ".optim." not in f".{q}." or not ix.is_torchish(q):
        return None
    wd = kwarg(call, "weight_decay")
    name = q.rsplit(".", 1)[-1]
    if wd is None:
        return f"{name}'s default weight_decay=0.01" if name == "AdamW" else None
    if isinstance(wd, ast.Constant) and isinstance(wd.value, (int, float)):
        return f"weight_decay={wd.value:g}" if wd.value else None
    return None


def _written_back(ix: FileIndex, loop: ast.stmt, owner: str, after: int) -> bool:
    """Whether the loop writes into ``owner``'s values after line ``after`` (a restore)."""
    for n in ast.walk(loop):
        if getattr(n, "lineno", 0) <= after:
            continue
        if isinstance(n, ast.Assign):
            for t in n.targets:
                base = t.value if isinstance(t, ast.Subscript) else t
                if isinstance(base, ast.Attribute) and base.attr == "data":
                    base = base.value
                if dotted(base) == owner:
                    return True
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                and n.func.attr in ("copy_", "index_copy_", "mul_", "masked_fill_"):
            base = n.func.value
            while isinstance(base, (ast.Subscript, ast.Attribute)) and not dotted(base) == owner:
                base = base.value
            if dotted(base) == owner:
                return True
    return False


@rule("frozen-params-moved")
def frozen_rows_decayed(ix: FileIndex) -> Iterator[Hit]:
    for loop in loop_units(ix):
        evs = events(ix, loop, depth=0)
        backs = [e.node.lineno for e in evs if e.kind == "backward" and not e.nested]
        steps = [e for e in evs if e.kind == "step" and not e.nested]
        if not backs or not steps:
            continue
        for node in ast.walk(loop):
            param = _partial_zeroing(ix, node)
            if param is None:
                continue
            line = node.lineno
            step = next((s for s in steps if s.node.lineno > line), None)
            if step is None or not any(b < line for b in backs):
                continue
            decay = _decay(ix, step.target)
            owner = dotted(param)
            if decay is None or owner is None or _written_back(ix, loop, owner, step.node.lineno):
                continue
            yield Hit("frozen-params-moved", node,
                      f"part of {owner}'s gradient is set to zero to keep those values fixed, but {step.target} "
                      f"decays every weight it holds whatever its gradient ({decay}): the 'frozen' values shrink "
                      f"towards zero at every step",
                      fix=f"keep the frozen part out of the decay (a param group with weight_decay=0, or the rows "
                      f"that learn as their own parameter), or copy the frozen values back after {step.target}"
                      f".step() (with torch.no_grad(): {owner}[frozen] = original[frozen])")
            break
