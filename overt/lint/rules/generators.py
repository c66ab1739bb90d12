"""Parameters kept as a one-shot iterator and used again (OVT117 ``clip-without-gradients``, issue 33).

``params = model.parameters()`` (or ``filter(...)``, ``map(...)``, a generator expression) is an
iterator: the first call that reads it (the optimizer's constructor, say) uses it up, and a later
``clip_grad_norm_(params, ...)`` clips nothing, in silence.  The rule follows a name bound once in
its scope to such an iterator and reports a clipping call (or an optimizer built from it) that
reads it after another reading call, or inside a loop that does not rebind it.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex
from overt.lint.rules.base import Hit, rule

_CLIPS = ("clip_grad_norm_", "clip_grad_value_", "clip_grad_norm")


def _iterator_kind(ix: FileIndex, value: ast.AST) -> str | None:
    """What makes ``value`` a one-shot iterator of parameters, or None."""
    if isinstance(value, ast.GeneratorExp):
        return "a generator expression"
    if not isinstance(value, ast.Call):
        return None
    if isinstance(value.func, ast.Attribute) and value.func.attr == "parameters" and not value.args:
        return f"{ast.unparse(value)} (a generator)"
    if isinstance(value.func, ast.Name) and value.func.id in ("filter", "map") and len(value.args) == 2:
        inner = value.args[1]
        if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "parameters":
            return f"{value.func.id}(...) over {ast.unparse(inner)} (an iterator)"
    return None


def _reader(ix: FileIndex, call: ast.Call) -> str | None:
    """'clip' or 'optimizer' for the calls that matter, 'other' for any other call."""
    q = ix.qualname(call.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last in _CLIPS:
        return "clip"
    if ix.is_torchish(q) and ".optim." in f".{q}." and last[:1].isupper():
        return "optimizer"
    return "other"


@rule("clip-without-gradients")
def clip_without_gradients(ix: FileIndex) -> Iterator[Hit]:
    functions = (ast.FunctionDef, ast.AsyncFunctionDef)
    scopes: list[ast.AST] = [ix.tree] + [n for n in ast.walk(ix.tree) if isinstance(n, functions)]
    for scope in scopes:
        nodes = ix.scope_nodes(scope)
        binds: dict[str, list[ast.Assign]] = {}
        for n in nodes:
            if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name):
                binds.setdefault(n.targets[0].id, []).append(n)
            elif isinstance(n, (ast.For, ast.AugAssign)) and isinstance(getattr(n, "target", None), ast.Name):
                binds.setdefault(n.target.id, []).append(n)  # type: ignore[arg-type]
        for name, assigns in binds.items():
            if len(assigns) != 1 or not isinstance(assigns[0], ast.Assign):
                continue
            kind = _iterator_kind(ix, assigns[0].value)
            if kind is None:
                continue
            reads = [n for n in nodes if isinstance(n, ast.Call) and n is not assigns[0].value
                     and any(isinstance(a, ast.Name) and a.id == name for a in list(n.args)
                             + [k.value for k in n.keywords])]
            reads.sort(key=lambda c: (c.lineno, c.col_offset))
            for i, call in enumerate(reads):
                what = _reader(ix, call)
                if what == "other":
                    continue
                loop = next((a for a in ix.ancestors(call) if isinstance(a, (ast.For, ast.While))
                             and a is not scope and not _inside(assigns[0], a)), None)
                earlier = reads[:i]
                if not earlier and loop is None:
                    continue
                first = earlier[0] if earlier else call
                by = (f"{ast.unparse(first.func)}(...) at line {first.lineno}" if earlier
                      else f"the first pass of the loop at line {loop.lineno}")  # type: ignore[union-attr]
                yield Hit("clip-without-gradients", call,
                          f"`{name}` is {kind}, already used up by {by}: "
                          f"{ast.unparse(call.func)} gets an empty iterable and "
                          + ("clips nothing, so the run trains unclipped" if what == "clip"
                             else "PyTorch raises 'optimizer got an empty parameter list'"),
                          fix=f"{name} = list({ast.unparse(assigns[0].value)})")
                break


def _inside(node: ast.AST, container: ast.AST) -> bool:
    return any(n is node for n in ast.walk(container))
