"""A copy of the training state taken before steps and never read (OVT817 ``state-snapshot-not-restored``,
issue 33: the order of training events).

The premise: a program copies a model's or an optimizer's state (``copy.deepcopy(model.state_dict())``,
``{k: v.clone() for k, v in model.state_dict().items()}``) for one reason, to put it back or compare with it
later.  A copy taken before the program steps an optimizer, and read nowhere after, is a restore the program
dropped: a learning-rate range test, a trial run, a probe whose changes were to be undone
(davidtvs/pytorch-lr-finder#11: the finder leaves the weights and the momenta where the diverging rates put
them, and the real training starts from a wrecked model).

Proven from the code of one file: the copy is bound to plain names (not an attribute another file may
read), outside any loop (a copy kept under an improvement test is ``best-model-not-restored``'s, and a name
with ``best`` in it is left to that rule); no name it is bound to is read anywhere in the file, and no
``locals()``/``globals()``/``vars()``/``eval``/``exec``/``global`` can read it out of sight; an optimizer's
``step()`` is called inside a loop later in the same scope.  Names starting with ``_`` are taken as unused
on purpose.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import SCOPE_TYPES, FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_DYNAMIC = ("locals", "globals", "vars", "eval", "exec")


def _state_of(node: ast.AST) -> str | None:
    """The object whose ``state_dict()`` ``node`` copies: ``copy.deepcopy(x.state_dict())``, or a dict
    comprehension over ``x.state_dict().items()`` that clones its values; else None."""
    if isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords:
        func = node.func
        name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        arg = node.args[0]
        if name == "deepcopy" and isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute) \
                and arg.func.attr == "state_dict" and not arg.args:
            return dotted(arg.func.value)
    if isinstance(node, ast.DictComp) and len(node.generators) == 1:
        it = node.generators[0].iter
        if isinstance(it, ast.Call) and isinstance(it.func, ast.Attribute) and it.func.attr == "items":
            inner = it.func.value
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) \
                    and inner.func.attr == "state_dict" and not inner.args \
                    and any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                            and n.func.attr in ("clone", "copy", "deepcopy") for n in ast.walk(node.value)):
                return dotted(inner.func.value)
    return None


def _copies(value: ast.AST) -> list[str]:
    parts = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
    out = [_state_of(p) for p in parts]
    return [o for o in out if o] if all(out) else []


def _later_step(ix: FileIndex, stmt: ast.stmt, scope: ast.AST) -> ast.Call | None:
    """An optimizer's ``step()`` inside a loop, after ``stmt`` in ``scope`` (its own body, no nested scope)."""
    end = stmt.end_lineno or stmt.lineno
    for n in ix.scope_nodes(scope):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "step" \
                and n.lineno > end and ix.is_optimizer(dotted(n.func.value)) and ix.enclosing_loops(n):
            return n
    return None


@rule("state-snapshot-not-restored")
def state_snapshot_not_restored(ix: FileIndex) -> Iterator[Hit]:
    if any(isinstance(c.func, ast.Name) and c.func.id in _DYNAMIC for c in ix.calls) or any(
            isinstance(n, ast.Global) for n in ix.kids):
        return  # names read out of sight
    loads = None
    for node in ix.kids:
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        sources = _copies(node.value)
        if not sources:
            continue
        target = node.targets[0]
        names = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
        if not names or not all(isinstance(e, ast.Name) for e in names):
            continue
        ids = [e.id for e in names]
        if any(i.startswith("_") or "best" in tokens(i) for i in ids):
            continue
        if ix.enclosing_loops(node) or isinstance(ix.parents.get(node), ast.ClassDef):
            continue
        if loads is None:
            loads = {n.id for n in ix.kids if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if any(i in loads for i in ids):
            continue
        scope = next((a for a in ix.ancestors(node) if isinstance(a, SCOPE_TYPES)), ix.tree)
        step = _later_step(ix, node, scope)
        if step is None:
            continue
        what = " and ".join(f"`{s}`" for s in dict.fromkeys(sources))
        name = ", ".join(ids)
        yield Hit("state-snapshot-not-restored", target,
                  f"`{name}` keeps a copy of {what}'s state taken at line {node.lineno}, before "
                  f"`{ix.segment(step)}` (line {step.lineno}) changes it, but nothing in this file ever reads the "
                  f"copy: whatever the steps did (a learning-rate range test, a trial run, a probe) stays in the "
                  f"weights and the optimizer's state the run goes on with",
                  fix=f"put it back where the trial ends (`{sources[0]}.load_state_dict({ids[0]}"
                      f"{'[0]' if len(sources) > 1 and len(ids) == 1 else ''})`"
                      f"{' and the same for each copy' if len(sources) > 1 else ''}), or remove the copy")

