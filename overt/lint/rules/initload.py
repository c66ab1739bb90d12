"""Weights initialised after they were loaded (OVT609 ``init-after-load``, issue 33).

``model.load_state_dict(checkpoint)`` followed, in the same block, by an initialisation of the same
``model`` overwrites the checkpoint with fresh random weights: the run looks resumed (or
fine-tuned) and starts from scratch.  An initialisation is ``model.reset_parameters()``,
``model.apply(fn)`` where ``fn`` initialises (its name says ``init``, or it is defined here and
calls ``nn.init`` or ``reset_parameters``), a method of a class defined here that does the same
(``model.init_weights()``), or ``nn.init.*`` over every parameter of ``model`` in a loop.  The two
statements must be siblings of one block, the load first (``if resume: load ... else: init`` is
fine).  Re-initialising a submodule (``model.fc.reset_parameters()``: a new head on a loaded
backbone) is left alone.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule


def _initialises(ix: FileIndex, body: ast.AST) -> bool:
    """Whether the code under ``body`` calls ``nn.init.*`` or ``reset_parameters``."""
    for sub in ast.walk(body):
        if isinstance(sub, ast.Call):
            name = dotted(sub.func) or ""
            q = ix.qualname(sub.func) or name
            if ".init." in f".{q}" and q.rstrip("_") != q or name.endswith("reset_parameters"):
                return True
    return False


def _functions(ix: FileIndex, name: str) -> list[ast.AST]:
    found: list[ast.AST] = list(ix.functions.get(name, []))
    for cls in ix.classes.values():
        found += [f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)) and f.name == name]
    return found


def _init_call(ix: FileIndex, stmt: ast.stmt, model: str) -> ast.Call | None:
    """The call of ``stmt`` that initialises the whole ``model``, if any."""
    if isinstance(stmt, ast.For):
        it = stmt.iter
        if isinstance(it, ast.Call) and dotted(it.func) in (f"{model}.parameters", f"{model}.named_parameters") \
                and _initialises(ix, ast.Module(body=stmt.body, type_ignores=[])):
            return it
        return None
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return None
    call = stmt.value
    func = call.func
    if not isinstance(func, ast.Attribute) or dotted(func.value) != model:
        return None
    if func.attr == "reset_parameters":
        return call
    if func.attr == "apply" and call.args:
        fn = call.args[0]
        name = dotted(fn) or ""
        if "init" in name.lower():
            return call
        defs = _functions(ix, name.rsplit(".", 1)[-1]) if name else []
        return call if defs and all(_initialises(ix, d) for d in defs) else None
    defs = _functions(ix, func.attr)
    if defs and all(_initialises(ix, d) for d in defs) and func.attr not in ("load_state_dict", "forward"):
        return call
    return None


@rule("init-after-load")
def init_after_load(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if not isinstance(call.func, ast.Attribute) or call.func.attr != "load_state_dict":
            continue
        model = dotted(call.func.value)
        if not model:
            continue
        stmt = ix.statement_of(call)
        parent = ix.parents.get(stmt)
        body = next((b for f in ("body", "orelse", "finalbody") if isinstance(b := getattr(parent, f, None), list)
                     and stmt in b), None)
        if body is None:
            continue
        for later in body[body.index(stmt) + 1:]:
            if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "load_state_dict"
                   and dotted(n.func.value) == model for n in ast.walk(later)):
                break  # loaded again: what follows is about that load
            init = _init_call(ix, later, model)
            if init is not None:
                yield Hit("init-after-load", init,
                          f"`{ix.segment(init)}` initialises `{model}` after `{model}.load_state_dict(...)` at line "
                          f"{call.lineno}: the loaded weights are overwritten with fresh random ones, and the run "
                          "starts from scratch while it looks resumed",
                          fix="initialise before load_state_dict (or skip the init when a checkpoint is loaded); "
                          "re-initialise only the layers the checkpoint does not hold")
                break
