"""A loss between a quantity and itself (OVT325 ``loss-compares-itself``, issue 33).

A distance loss between two expressions that are the same quantity is constant at its minimum and
trains nothing: ``F.kl_div(F.log_softmax(t / T), F.softmax(t / T))`` (a distillation loss that takes
the teacher on both sides), ``F.mse_loss(x, x.detach())``.  The rule follows each argument of a
``kl_div``/``KLDivLoss`` or regression loss back through local names that have one definition
(``soft = F.softmax(t / T)``; a call is one value: the call reached twice through names is the
same, two calls written alike are not), drops what does not change the quantity (``detach``, ``clone``,
dtype and device moves; for ``kl_div`` also the ``softmax``/``log_softmax``/``exp``/``log`` that put
a distribution in the form each side expects) and compares what is left.  Identical expressions
over the same definitions: a hit.  Any difference -- another tensor, another slice (``z[:n]`` against
``z[n:]``), a name with several definitions -- is left alone.  Cross-entropy and BCE are not checked:
``cross_entropy(x, softmax(x))`` is an entropy, a real training signal.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.losses import loss_kind

_KL = {"kl_div", "KLDivLoss"}
_DISTANCE = {"mse_loss", "MSELoss", "l1_loss", "L1Loss", "smooth_l1_loss", "SmoothL1Loss", "huber_loss", "HuberLoss"}
_SAME_VALUE = {"detach", "clone", "float", "double", "half", "bfloat16", "to", "cpu", "cuda", "contiguous"}
_DISTRIBUTION = {"softmax", "log_softmax", "exp", "log", "sigmoid", "logsigmoid"}
_DEPTH = 6


def _canon(ix: FileIndex, expr: ast.AST, strip: frozenset[str], depth: int = 0) -> str:
    """A text for what ``expr`` computes: local names with one definition inlined, the calls in
    ``strip`` dropped, other names tagged with their definitions."""
    if isinstance(expr, ast.Name):
        defs = values_for(ix).defs(expr)
        if len(defs) == 1 and depth < _DEPTH:
            d = next(iter(defs))
            if d.kind == "assign" and d.index is None and d.value is not None:
                return _canon(ix, d.value, strip, depth + 1)
        return f"{expr.id}@{sorted(id(d.node) for d in defs)}"
    if isinstance(expr, ast.Call):
        name = (dotted(expr.func) or "").rsplit(".", 1)[-1]
        if name in strip:
            if isinstance(expr.func, ast.Attribute) and not (expr.args and _module_call(ix, expr.func)):
                return _canon(ix, expr.func.value, strip, depth)  # x.detach(), t.softmax(1)
            if expr.args:
                return _canon(ix, expr.args[0], strip, depth)  # F.softmax(x, 1), torch.exp(x)
        # any other call is one evaluation: two calls, even written alike, are two values (two draws of
        # torch.randn, two forwards through dropout: R-Drop's consistency loss)
        return f"call#{id(expr)}"
    parts = [type(expr).__name__]
    for field, value in ast.iter_fields(expr):
        if field in ("ctx", "lineno", "col_offset", "end_lineno", "end_col_offset"):
            continue
        if isinstance(value, ast.AST):
            parts.append(f"{field}={_canon(ix, value, strip, depth)}")
        elif isinstance(value, list):
            items = (_canon(ix, v, strip, depth) if isinstance(v, ast.AST) else repr(v) for v in value)
            parts.append(f"{field}=[{','.join(items)}]")
        else:
            parts.append(f"{field}={value!r}")
    return "(" + " ".join(parts) + ")"


def _module_call(ix: FileIndex, func: ast.Attribute) -> bool:
    """``F.softmax(x)``/``torch.exp(x)``: a function of a module, the tensor is its first argument."""
    q = ix.qualname(func) or ""
    return ix.is_torchish(q) or isinstance(func.value, ast.Name) and func.value.id in ix.imports


@rule("loss-compares-itself")
def loss_compares_itself(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        kind = loss_kind(ix, call)
        q = ix.qualname(call.func) or ""
        if kind is None and q.endswith(".kl_div") and ix.is_torchish(q):
            kind = "kl_div"
        if kind not in _KL and kind not in _DISTANCE:
            continue
        a = call.args[0] if call.args else kwarg(call, "input")
        b = call.args[1] if len(call.args) > 1 else kwarg(call, "target")
        if a is None or b is None:
            continue
        strip = frozenset(_SAME_VALUE | (_DISTRIBUTION if kind in _KL else set()))
        if _canon(ix, a, strip) != _canon(ix, b, strip):
            continue
        what = ("the same distribution on both sides (log-probabilities and probabilities of one tensor)"
                if kind in _KL else "the same tensor on both sides")
        yield Hit("loss-compares-itself", call,
                  f"{kind} compares `{ix.segment(a)}` with `{ix.segment(b)}`: {what}, so the loss is constant at its "
                  "minimum, gives no gradient and trains nothing (a distillation loss that takes the teacher's output "
                  "twice does this)",
                  fix="pass the model's own output as the input and the reference (the teacher's output, the label) "
                  "as the target")
