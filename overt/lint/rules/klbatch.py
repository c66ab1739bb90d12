"""A minibatch's likelihood next to the whole data set's KL, neither rescaled (OVT346 ``loss-terms-misscaled``,
lint face; issue 33, the wild corpus's w459).

Premise: in stochastic variational inference the KL divergence of the variational parameters from their prior
belongs to the whole data set once, while a likelihood computed on a minibatch covers ``B`` of its ``N``
points.  An ELBO estimated from one batch is ``N / B * loglik(batch) - KL`` (or, divided through,
``loglik(batch) - B / N * KL``).  Added together unscaled (``loglik(batch) - KL``), the KL is weighted ``N / B``
times too much against the data: the posterior is held near its prior and the model underfits, while the ELBO
still rises (tachukao/mgplvm-pytorch#19; a Bayes-by-backprop network adding its weights' KL to every batch's
loss without dividing by the number of batches is the same bug).

Reported on a ``+``/``-`` chain inside a loop where (a) one term is, with no factor, a call to a KL of the
variational parameters alone -- a method of a class of the same file, named with the word ``kl``, given no
argument, whose body reads only ``self`` attributes bound in ``__init__`` (parameters, not state a forward pass
left), or a ``variational`` object's ``kl_divergence()`` -- and (b) another term is, with no factor, a call whose
arguments read a value bound inside that loop (the loop's batch, ``x[idx]`` for an ``idx`` drawn there).  Silent
when either term carries a factor (``N / len(idx) * ll``, ``kl / num_batches``, ``beta * kl``), when the data
term reads no per-iteration value (a full-batch ELBO), and on KLs given arguments or reading state a forward
pass set (a VAE's per-sample KL, ``F.kl_div``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_LOOPS = (ast.For, ast.AsyncFor, ast.While)


def _words(name: str) -> set[str]:
    spaced = re.sub(r"([a-z])([A-Z])", r"\1_\2", name)
    return {w for w in re.split(r"[^A-Za-z]+", spaced.lower()) if w}


def _terms(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        return _terms(node.left) + _terms(node.right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return _terms(node.operand)
    return [node]


def _unwrap(node: ast.expr) -> ast.expr:
    """``f(...).sum()`` / ``.mean()`` read as ``f(...)``."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("sum", "mean") \
            and not node.args and not node.keywords and isinstance(node.func.value, ast.Call):
        node = node.func.value
    return node


def _init_attrs(cls: ast.ClassDef) -> tuple[set[str], set[str]]:
    """Attributes of ``self`` bound in ``__init__``, and those bound in any other method."""
    init: set[str] = set()
    other: set[str] = set()
    for fn in cls.body:
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        for n in ast.walk(fn):
            targets: list[ast.AST] = []
            if isinstance(n, ast.Assign):
                targets = list(n.targets)
            elif isinstance(n, (ast.AnnAssign, ast.AugAssign)):
                targets = [n.target]
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id == "setattr":
                other.add("*")
            for t in targets:
                for e in ast.walk(t):
                    if isinstance(e, ast.Attribute) and isinstance(e.value, ast.Name) and e.value.id == "self":
                        (init if fn.name == "__init__" else other).add(e.attr)
    return init, other


def _param_kl(ix: FileIndex, node: ast.expr) -> bool:
    """``node`` is a call, with no argument, of a KL of parameters alone (see the module's docstring)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)) or node.args or node.keywords:
        return False
    name = node.func.attr
    if "kl" not in _words(name) or "div" in _words(name) and "divergence" not in _words(name):
        return False
    chain = dotted(node.func.value) or ""
    if name == "kl_divergence" and "variational" in chain.lower():
        return True
    methods = [(cls, fn) for cls in ast.walk(ix.tree) if isinstance(cls, ast.ClassDef) for fn in cls.body
               if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) and fn.name == name]
    return bool(methods) and all(_reads_parameters(cls, fn) for cls, fn in methods)


def _reads_parameters(cls: ast.ClassDef, fn: ast.AST) -> bool:
    """``fn`` (a method of ``cls``), and the methods it calls on ``self``, read only attributes bound in
    ``__init__``: parameters, not state a forward pass left."""
    init, other = _init_attrs(cls)
    if "*" in other:
        return False
    methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
    seen: set[str] = set()
    todo = [fn]
    while todo:
        cur = todo.pop()
        for n in ast.walk(cur):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self":
                if n.attr in methods:
                    if n.attr not in seen:
                        seen.add(n.attr)
                        todo.append(methods[n.attr])
                elif n.attr in other or n.attr not in init:
                    return False
    return True


def _is_range(it: ast.expr) -> bool:
    """``range(...)``, or ``enumerate``/``reversed`` of one: a counter, not the data."""
    while isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id in ("enumerate", "reversed") \
            and it.args:
        it = it.args[0]
    return isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"


def _per_batch(loops: list[ast.AST]) -> tuple[set[str], set[str]]:
    """Names that draw a batch in ``loops``: ``(indices, batches)``.  Indices are loop counters and names
    assigned in a loop's body from one (``idx = perm[i:i + B]``); batches are the targets of a loop over
    anything but a ``range`` (a loader, a list of batches)."""
    indices: set[str] = set()
    batches: set[str] = set()
    for loop in loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            names = {e.id for e in ast.walk(loop.target) if isinstance(e, ast.Name)}
            indices |= names
            if not _is_range(loop.iter):
                batches |= names
    for loop in loops:
        for stmt in loop.body:  # type: ignore[attr-defined]
            for n in ast.walk(stmt):
                if isinstance(n, ast.Assign) and any(isinstance(e, ast.Name) and e.id in indices
                                                     for e in ast.walk(n.value)):
                    indices |= {e.id for t in n.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
    return indices, batches


def _batch_term(node: ast.expr, indices: set[str], batches: set[str]) -> bool:
    """A call, with no factor, whose arguments read a batch: a loop's batch, or data indexed by a loop's index."""
    if not isinstance(node, ast.Call):
        return False
    for arg in [*node.args, *(k.value for k in node.keywords)]:
        for e in ast.walk(arg):
            if isinstance(e, ast.Name) and e.id in batches:
                return True
            if isinstance(e, ast.Subscript) and any(isinstance(m, ast.Name) and m.id in indices
                                                    for m in ast.walk(e.slice)):
                return True
    return False


@rule("loss-terms-misscaled")
def kl_beside_batch(ix: FileIndex) -> Iterator[Hit]:
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub))):
            continue
        parent = ix.parents.get(node)
        if isinstance(parent, (ast.BinOp, ast.UnaryOp)):
            continue
        loops: list[ast.AST] = []
        for a in ix.ancestors(node):
            if isinstance(a, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)):
                break  # the loops of the sum's own scope
            if isinstance(a, _LOOPS):
                loops.append(a)
        if not loops:
            continue
        terms = [_unwrap(t) for t in _terms(node)]
        kl = next((t for t in terms if _param_kl(ix, t)), None)
        if kl is None:
            continue
        indices, batches = _per_batch(loops)
        data = next((t for t in terms if t is not kl and _batch_term(t, indices, batches)), None)
        if data is None:
            continue
        k, d = ix.segment(kl), ix.segment(data)
        yield Hit("loss-terms-misscaled", node,
                  f"`{k}`, a KL divergence of the variational parameters alone, is added unscaled to `{d}`, a "
                  f"likelihood computed on this iteration's minibatch: the KL belongs to the whole data set once, "
                  f"the batch's likelihood to B of its N points, so the KL weighs N / B times too much against the "
                  "data -- the posterior is held near its prior and the model underfits while the ELBO still rises",
                  fix=f"scale the batch's term to the data set (`N / batch_size * {d}`), or divide the KL by the "
                      "number of batches per epoch")

