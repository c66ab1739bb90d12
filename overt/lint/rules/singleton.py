"""A softmax or argmax over an axis of size 1, where the code shows the size (OVT424 ``singleton-axis``,
issue 33; its runtime check: :mod:`overt.guards.singleton`).

The size is shown only by a module whose output's last axis is 1 by construction: an ``nn.Linear``
with a literal ``out_features`` of 1 (``self.attn = nn.Linear(h, 1)`` in a class, or a name bound to
it), or an ``nn.Sequential`` whose last layer is one.  Its output, called in the same class or scope
(``scores = self.attn(h)``, ``logits = model(x)``, each name bound once there), given to
``softmax``/``log_softmax``/``argmax``/``argmin`` (tensor method, ``torch.``, ``F.``) over ``dim=-1``
-- the last axis, the one of size 1 -- is reported; ``dim=1`` only when the module's input is a
two-argument ``reshape``/``view`` (the output is then 2-D, so dimension 1 is the last).  Silent on any
other dim (the rank of the output is unknown), on a name bound twice, on modules whose width is not a
literal.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_SINKS = frozenset({"softmax", "log_softmax", "argmax", "argmin"})
_OWNERS = frozenset({"torch", "F", "nn.functional", "torch.nn.functional", "functional"})


def _one_wide_linear(node: ast.AST) -> bool:
    if not isinstance(node, ast.Call) or (dotted(node.func) or "").rsplit(".", 1)[-1] != "Linear":
        return False
    width = node.args[1] if len(node.args) >= 2 else kwarg(node, "out_features")
    return isinstance(width, ast.Constant) and width.value == 1 and not isinstance(width.value, bool)


def _one_wide(node: ast.AST) -> ast.Call | None:
    """The one-wide ``nn.Linear`` that ends the module ``node`` builds, or None."""
    if _one_wide_linear(node):
        return node  # type: ignore[return-value]
    if isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] == "Sequential" \
            and node.args and not node.keywords and not isinstance(node.args[-1], ast.Starred) \
            and _one_wide_linear(node.args[-1]):
        return node.args[-1]  # type: ignore[return-value]
    return None


def _bindings(nodes: list[ast.AST]) -> dict[str, list[ast.AST]]:
    """name (dotted) -> the statements of ``nodes`` that bind it."""
    out: dict[str, list[ast.AST]] = {}

    def add(target: ast.AST, stmt: ast.AST) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            for e in target.elts:
                add(e, stmt)
        elif isinstance(target, ast.Starred):
            add(target.value, stmt)
        else:
            name = dotted(target)
            if name:
                out.setdefault(name, []).append(stmt)

    for node in nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                add(t, node)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.AsyncFor)):
            add(node.target, node)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    add(item.optional_vars, node)
        elif isinstance(node, ast.NamedExpr):
            add(node.target, node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs):
                out.setdefault(a.arg, []).append(node)
    return out


def _single(binds: dict[str, list[ast.AST]], name: str) -> ast.Assign | None:
    stmts = binds.get(name, [])
    if len(stmts) == 1 and isinstance(stmts[0], ast.Assign) and len(stmts[0].targets) == 1:
        return stmts[0]
    return None


def _sink(call: ast.Call) -> tuple[str, ast.expr, ast.expr | None] | None:
    """(function, its tensor, its dim) of ``t.softmax(dim)``/``F.softmax(t, dim)``/``torch.argmax(t, dim)``."""
    func = call.func
    if not isinstance(func, ast.Attribute) or func.attr not in _SINKS:
        return None
    owner = dotted(func.value)
    if owner in _OWNERS:
        if not call.args:
            return None
        return func.attr, call.args[0], kwarg(call, "dim") or (call.args[1] if len(call.args) > 1 else None)
    return func.attr, func.value, kwarg(call, "dim") or (call.args[0] if call.args else None)


def _last_axis(dim: ast.expr | None, producer: ast.Call) -> bool:
    if dim is None:
        return False
    if isinstance(dim, ast.UnaryOp) and isinstance(dim.op, ast.USub) and isinstance(dim.operand, ast.Constant):
        return dim.operand.value == 1
    if isinstance(dim, ast.Constant) and dim.value == 1 and producer.args:
        x = producer.args[0]  # the module's input: a two-argument reshape/view makes the output 2-D
        return isinstance(x, ast.Call) and isinstance(x.func, ast.Attribute) and x.func.attr in ("reshape", "view") \
            and len(x.args) == 2 and not x.keywords and not any(isinstance(a, ast.Starred) for a in x.args)
    return False


def _modules(binds: dict[str, list[ast.AST]]) -> dict[str, tuple[ast.Call, int]]:
    """name -> (the one-wide Linear it ends with, the line it is built) of the names bound once to one."""
    out: dict[str, tuple[ast.Call, int]] = {}
    for name in binds:
        assign = _single(binds, name)
        linear = _one_wide(assign.value) if assign is not None and "." not in name else None
        if assign is not None and linear is not None:
            out[name] = (linear, assign.lineno)
    return out


@rule("singleton-axis")
def singleton_axis(ix: FileIndex) -> Iterator[Hit]:
    """``self.attn = nn.Linear(h, 1)`` then ``F.softmax(self.attn(x), dim=-1)``; ``model =
    nn.Sequential(..., nn.Linear(64, 1))`` then ``model(x).argmax(dim=-1)`` (issue 33; w158, w163)."""
    scopes: list[tuple[ast.AST, ast.ClassDef | None]] = [(ix.tree, None)]
    for funcs in ix.functions.values():
        for func in funcs:
            scopes.append((func, ix.enclosing_class(func)))
    class_binds: dict[int, dict[str, list[ast.AST]]] = {}
    scope_binds = {id(scope): _bindings(ix.scope_nodes(scope)) for scope, _ in scopes}
    top = _modules(scope_binds[id(ix.tree)])  # the file's own: seen by its functions that do not rebind them
    for scope, cls in scopes:
        binds = scope_binds[id(scope)]
        # module name -> (its one-wide Linear, line built)
        modules = {**{k: v for k, v in top.items() if k not in binds}, **_modules(binds)}
        if cls is not None:
            cb = class_binds.get(id(cls))
            if cb is None:
                cb = class_binds[id(cls)] = _bindings(list(ast.walk(cls)))
            for name in cb:
                assign = _single(cb, name)
                if name.startswith("self.") and assign is not None:
                    linear = _one_wide(assign.value)
                    if linear is not None:
                        modules[name] = (linear, assign.lineno)
        if not modules:
            continue

        def produced(expr: ast.AST) -> tuple[ast.Call, str, ast.Call, int] | None:
            """(the module call, its name, its Linear, line) when ``expr`` is a one-wide module's output."""
            if isinstance(expr, ast.Call) and dotted(expr.func) in modules:
                name = dotted(expr.func) or ""
                return (expr, name, *modules[name])
            return None

        values: dict[str, tuple[ast.Call, str, ast.Call, int]] = {}
        for name in binds:
            assign = _single(binds, name)
            if assign is not None and "." not in name:
                got = produced(assign.value)
                if got is not None:
                    values[name] = got
        for node in ix.scope_nodes(scope):
            if not isinstance(node, ast.Call):
                continue
            found = _sink(node)
            if found is None:
                continue
            fname, tensor, dim = found
            got = produced(tensor) or (values.get(tensor.id) if isinstance(tensor, ast.Name) else None)
            if got is None or not _last_axis(dim, got[0]):
                continue
            mod_call, mod_name, linear, line = got
            if isinstance(tensor, ast.Name) and binds[tensor.id][0].lineno > node.lineno:
                continue
            yield _hit(node, fname, ast.unparse(tensor), mod_name, ast.unparse(linear), line)


def _hit(node: ast.Call, fname: str, tensor: str, module: str, linear: str, line: int) -> Hit:
    if fname in ("softmax", "log_softmax"):
        what = (f"a {fname} over one element is always {'0' if fname == 'log_softmax' else '1'}, whatever the "
                "scores: the result carries nothing of its input and no gradient reaches the scores (attention "
                "weights that are all 1 make the pooling a plain sum)")
        fix = ("normalise over the axis that holds the alternatives: put them on one axis first "
               "(scores.view(batch, seq_len).softmax(dim=1) for attention over a sequence); for one logit per "
               "sample use torch.sigmoid (or BCEWithLogitsLoss), not a softmax")
    else:
        what = ("the index of the largest (or smallest) of one element is always 0: every prediction read from it "
                "is 0 whatever the model outputs (a regression output or a binary classifier's one logit read by "
                "argmax)")
        fix = ("read a single output directly: out.squeeze(-1) for a regression, (out.squeeze(-1) > 0) for one "
               "logit (sigmoid > 0.5); or give the head one output per class")
    return Hit("singleton-axis", node,
               f"`{ast.unparse(node)}` works over the last axis of `{tensor}`, the output of `{module}` whose last "
               f"layer is `{linear}` (line {line}): that axis has size 1, and {what}", fix=fix)
