"""Dropout mistakes: functional dropout that ignores the model's mode (OVT205 ``dropout-always-on``) and a
dropout that drops most of its inputs (OVT208 ``dropout-drops-most``, issue 33)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, has_star_kwargs, is_const, kwarg
from overt.lint.rules.base import Hit, decided, rule

#: torch.nn.functional's dropouts, whose ``training`` argument defaults to True
FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")


def _functional(ix: FileIndex, call: ast.Call) -> str | None:
    """``F.dropout``-like calls (through any import alias of torch.nn.functional), by name."""
    q = ix.qualname(call.func) or ""
    head, _, last = q.rpartition(".")
    if last not in FUNCTIONS or not ix.is_torchish(q):
        return None
    if head.endswith("functional") or head in ("F",):
        return last
    return None


def _mode_guarded(ix: FileIndex, call: ast.Call, func: ast.AST) -> bool:
    """Is ``call`` under an ``if`` (or conditional expression) that tests the module's mode
    (``if self.training and self.p > 0:``)?  Then training=True is right where it runs."""
    for anc in ix.ancestors(call):
        if anc is func:
            return False
        if isinstance(anc, (ast.If, ast.IfExp, ast.While)):
            for n in ast.walk(anc.test):
                if (isinstance(n, ast.Attribute) and n.attr == "training") or (
                        isinstance(n, ast.Name) and n.id in ("training", "train", "is_training")):
                    return True
    return False


def _caller_knob(ix: FileIndex, call: ast.Call, func: ast.AST, p: ast.AST | None) -> bool:
    """``if noise_dropout > 0.: F.dropout(noise, p=noise_dropout)`` with ``noise_dropout`` a parameter of the
    method: a rate the caller turns on at call time (latent-diffusion's samplers), not a layer's dropout."""
    if not isinstance(p, ast.Name) or not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    params = {a.arg for f in [func, *ix.ancestors(func)] if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))
              for a in f.args.args + f.args.kwonlyargs}  # a closure sees its method's parameters too
    if p.id not in params:
        return False
    return any(isinstance(anc, ast.If) and any(isinstance(n, ast.Name) and n.id == p.id for n in ast.walk(anc.test))
               for anc in ix.ancestors(call) if anc is not func)


@rule("dropout-always-on")
def dropout_always_on(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        name = _functional(ix, call)
        if name is None or has_star_kwargs(call) or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        func = ix.enclosing_function(call)
        if func is None or ix.enclosing_class(func) is None:
            continue  # a free function has no self.training to pass: its caller decides
        p = kwarg(call, "p") or (call.args[1] if len(call.args) > 1 else None)
        if isinstance(p, ast.Constant) and isinstance(p.value, (int, float)) and p.value == 0:
            continue
        training = kwarg(call, "training") or (call.args[2] if len(call.args) > 2 else None)
        if training is not None and not is_const(training, True):
            continue  # training=self.training, a flag, a condition: the author decides
        if _mode_guarded(ix, call, func) or _caller_knob(ix, call, func, p):
            continue
        what = "training=True" if training is not None else "no training= argument"
        hit = Hit("dropout-always-on", call,
                  f"F.{name} with {what} in {func.name}(): it keeps dropping units after model.eval(), so "
                  f"validation, inference and every metric are randomly noisy",
                  fix="pass training=self.training (or use an nn.Dropout layer)")
        yield decided(hit, "training=True") if training is not None else hit


#: torch.nn's dropout layers, whose first argument is p
LAYERS = ("Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "AlphaDropout", "FeatureAlphaDropout")
#: a dropout whose p is above this drops most of its inputs (OVT208)
MOST = 0.7


def _keep_name(node: ast.AST) -> str | None:
    """The name of a keep probability (``keep_prob``, ``self.dropout_keep_prob``), or None."""
    name = node.id if isinstance(node, ast.Name) else node.attr if isinstance(node, ast.Attribute) else None
    return name if name and "keep" in name.lower() else None


@rule("dropout-drops-most")
def dropout_drops_most(ix: FileIndex) -> Iterator[Hit]:
    """``nn.Dropout(0.9)``, ``F.dropout(x, p=0.8)`` or ``nn.Dropout(keep_prob)``: p is the probability of
    dropping a unit, so a keep probability passed as p drops most or all of the activations."""
    for call in ix.calls:
        functional = _functional(ix, call)
        layer = None if functional else next((n for n in LAYERS if ix.call_is(call, n)), None)
        if (functional is None and layer is None) or has_star_kwargs(call) \
                or any(isinstance(a, ast.Starred) for a in call.args):
            continue
        position = 1 if functional else 0
        p = kwarg(call, "p") or (call.args[position] if len(call.args) > position else None)
        if p is None:
            continue
        training = kwarg(call, "training") or (call.args[2] if functional and len(call.args) > 2 else None)
        if functional and is_const(training, False):
            continue
        what = f"F.{functional}" if functional else f"nn.{layer}"
        keep = _keep_name(p)
        if keep is not None:
            yield Hit("dropout-drops-most", call,
                      f"{what} is given {keep}, a keep probability, as p, the probability of dropping a unit: a "
                      "keep probability of 0.9 drops 90% of the activations (1 drops them all, and nothing before "
                      "the dropout learns)",
                      fix=f"pass p=1 - {ix.segment(p)}")
        elif isinstance(p, ast.Constant) and isinstance(p.value, (int, float)) and not isinstance(p.value, bool) \
                and p.value > MOST:
            hit = Hit("dropout-drops-most", call,
                      f"{what} with p={p.value:g} drops {min(p.value, 1):.0%} of the activations in training: p is "
                      "the probability of dropping a unit, not of keeping it (a keep probability passed as p?)",
                      fix=f"p={1 - p.value:g} if {p.value:g} is the probability to keep; if dropping "
                      f"{min(p.value, 1):.0%} is meant, add '# overt: ignore[dropout-drops-most]'")
            if p.value >= 1:
                hit.severity = "error"
            yield hit
