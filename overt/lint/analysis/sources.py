"""Where a number comes from: the training pass, a validation pass or the test set.

:func:`origin` follows an expression (a loss, an accuracy, the value a model is selected on) back
to the data it was computed from, and answers with an :class:`Origin`: ``train``, ``val`` or
``test``, and the node that proves it.  Two kinds of proof:

- the training pass itself: a loss that ``.backward()`` is called on (``loss.backward()``,
  ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``), found through the name's
  reaching definitions, so a ``loss`` name reused by the validation loop is not confused with it;
- the data: a loader, data set or tensor whose name says its split (``train_loader``,
  ``val_ds``, ``X_test``), reached through names, accumulators (``total += loss.item()``), lists
  appended to, tuple unpacking, loop targets, and the returns of functions defined in the file
  (their parameters bound to the arguments of the call).

A quantity's own name (``val_loss``) is never taken as proof; a value that mixes splits, a
function that cannot be followed, a data name that says nothing: the answer is None, and the
rules built on it stay silent.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overt.lint.analysis.defs import Def
from overt.lint.analysis.values import values_for
from overt.lint.index import FileIndex, FuncNode, dotted, tokens

TRAIN, VAL, TEST = "train", "val", "test"
_ROLE_WORDS = {TRAIN: ("train", "training", "trn"), VAL: ("val", "vali", "valid", "validation", "dev", "heldout"),
               TEST: ("test", "testing")}
#: words that say a name holds data (a loader, a data set, inputs or labels), not a quantity
_DATA_WORDS = frozenset({"loader", "loaders", "dl", "dataloader", "set", "ds", "dataset", "data", "x", "y", "iter",
                         "batch", "batches", "inputs", "input", "images", "imgs", "labels", "targets", "target",
                         "features", "feats", "samples", "examples", "split", "queue", "gen", "generator",
                         "iterator", "sampler", "feed", "xs", "ys", "df", "frame", "tokens", "ids", "seqs",
                         "sequences", "texts", "loader_iter", "dataloaders", "env"})
_GLUE = ("loader", "set", "ds", "data", "dataset", "dl", "iter", "x", "y", "_")
#: what a running-average object (``AverageMeter``) is read through
_METER_READS = frozenset({"avg", "average", "mean", "sum", "val", "value", "global_avg", "median"})
#: calls whose result is a count, a shape or a size: neutral in a ratio or a product
_COUNTS = frozenset({"len", "size", "numel", "dim", "ndimension", "shape", "count", "range"})


@dataclass(frozen=True)
class Origin:
    """``kind``: train | val | test; ``node``: what proves it; ``how``: ``backward`` (the loss the
    training step trains on), ``step`` (a value that loss is computed from: the model's output in
    the training step, its batch) or ``data`` (computed from data whose name says the split)."""

    kind: str
    node: ast.AST
    how: str
    text: str = ""


CONST = Origin("const", ast.Constant(None), "const")  # no data at all: a constant, a count


def role(text: str) -> str | None:
    """The split a name says it belongs to (``train_loader`` -> train, ``X_test`` -> test,
    ``valloader`` -> val), or None; a name that says two splits says none."""
    toks = tokens(text)
    low = text.rsplit(".", 1)[-1].lower()
    found = set()
    for kind, words in _ROLE_WORDS.items():
        for w in words:
            if w in toks or any(low == w + g or low == g + w or low.startswith(w + g) for g in _GLUE if g != "_"):
                found.add(kind)
    return found.pop() if len(found) == 1 else None


def is_data_name(text: str) -> bool:
    """Does the name say it holds data (a loader, a data set, inputs, labels), not a number?"""
    toks = tokens(text)
    low = text.rsplit(".", 1)[-1].lower()
    return any(t in _DATA_WORDS for t in toks) or any(low.endswith(g) for g in ("loader", "set", "ds", "data", "dl")) \
        or (len(toks) == 2 and toks[0] in ("x", "y", "xs", "ys"))


def _loss_of(root: ast.AST) -> ast.AST:
    """The loss a backward call is made on: ``loss`` in ``loss``, ``scaler.scale(loss)``, ``loss / n``."""
    if isinstance(root, ast.Call) and isinstance(root.func, ast.Attribute) and root.func.attr == "scale" \
            and root.args:
        return _loss_of(root.args[0])
    if isinstance(root, ast.BinOp):
        return _loss_of(root.left)
    return root


def _join(found: list[Origin | None]) -> Origin | None:
    real = [o for o in found if o is not CONST]
    if any(o is None for o in real):
        return None
    if not real:
        return CONST
    kinds = {o.kind for o in real}
    if len(kinds) != 1:
        return None
    return next((o for o in real if o.how == "backward"), next((o for o in real if o.how == "step"), real[0]))


_Env = dict  # parameter name -> (argument expression, the caller's env)


class Sources:
    """The origin analysis of one file (cached per file by :func:`sources_for`)."""

    def __init__(self, ix: FileIndex):
        self.ix = ix
        self.values = values_for(ix)
        self._backward: dict[int, dict[Def, tuple[ast.Call, str]]] = {}
        self._budget = 0

    def origin(self, expr: ast.AST) -> Origin | None:
        """The split ``expr`` was computed from (a bounded search: None when it runs out)."""
        self._budget = 400
        got = self.of(expr)
        return None if got is CONST else got

    # -- the training step's losses ---------------------------------------------
    def backwarded(self, scope: ast.AST) -> dict[Def, tuple[ast.Call, str]]:
        """Definitions (in ``scope``) of the names a ``backward`` call is made on, with that call and
        ``backward`` (the loss itself) or ``step`` (a value the loss was computed from)."""
        found = self._backward.get(id(scope))
        if found is not None:
            return found
        found = {}
        for node in self.ix.scope_nodes(scope):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            attr = node.func.attr
            if attr == "backward":  # loss.backward(), scaler.scale(loss).backward(), accelerator.backward(loss)
                roots = [node.func.value, *node.args]
            elif attr == "manual_backward":  # Lightning
                roots = list(node.args)
            else:
                continue
            for root in roots:
                direct = {id(_loss_of(root))}  # loss, scaler.scale(loss), loss / accumulation
                for n in ast.walk(root):
                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load):
                        for d in self.values.defs(n):
                            if id(n) in direct or d not in found:
                                found[d] = (node, "backward" if id(n) in direct else "step")
        self._backward[id(scope)] = found
        return found

    # -- the entry point ------------------------------------------------------------
    def of(self, expr: ast.AST | None, env: _Env | None = None, depth: int = 0) -> Origin | None:
        """The split ``expr`` was computed from, CONST for no data, None when unknown or mixed."""
        if expr is None or depth > 14 or self._budget <= 0:
            return None
        self._budget -= 1
        env = env or {}
        if isinstance(expr, ast.Constant):
            return CONST
        if isinstance(expr, ast.Name):
            return self._name(expr, env, depth)
        if isinstance(expr, ast.Attribute):
            if expr.attr in ("shape", "ndim"):
                return CONST
            if expr.attr in ("data", "T", "grad"):
                return self.of(expr.value, env, depth + 1)
            if expr.attr in _METER_READS and isinstance(expr.value, ast.Name):
                fed = self._meter(expr.value, env, depth)
                if fed is not None:
                    return fed
            text = dotted(expr) or ""
            kind = role(text) if is_data_name(text) else None
            return Origin(kind, expr, "data", text) if kind else None
        if isinstance(expr, ast.Subscript):
            key = expr.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str) and role(key.value) \
                    and is_data_name(dotted(expr.value) or "data"):
                return Origin(role(key.value), expr, "data", f"{dotted(expr.value)}[{key.value!r}]")  # ds["test"]
            return self.of(expr.value, env, depth + 1)
        if isinstance(expr, ast.BinOp):
            if isinstance(expr.op, (ast.Div, ast.FloorDiv)):
                right = self.of(expr.right, env, depth + 1)
                left = self.of(expr.left, env, depth + 1)
                return left if right is CONST or right is None else _join([left, right])
            return _join([self.of(expr.left, env, depth + 1), self.of(expr.right, env, depth + 1)])
        if isinstance(expr, ast.UnaryOp):
            return self.of(expr.operand, env, depth + 1)
        if isinstance(expr, ast.IfExp):
            return _join([self.of(expr.body, env, depth + 1), self.of(expr.orelse, env, depth + 1)])
        if isinstance(expr, ast.Compare):
            return _join([self.of(e, env, depth + 1) for e in [expr.left, *expr.comparators]])
        if isinstance(expr, (ast.Tuple, ast.List, ast.Set)):
            return _join([self.of(e, env, depth + 1) for e in expr.elts])
        if isinstance(expr, (ast.ListComp, ast.GeneratorExp, ast.SetComp)):
            return _join([self.of(expr.elt, env, depth + 1)])
        if isinstance(expr, ast.Call):
            return self._call(expr, env, depth)
        return None

    # -- names ------------------------------------------------------------------------
    def _name(self, name: ast.Name, env: _Env, depth: int) -> Origin | None:
        defs = self.values.defs(name)
        if not defs:
            return self._named(name.id, name)
        scope = self.values.scope(name)
        backs = self.backwarded(scope)
        if not any(d in backs for d in defs):
            named = self._named(name.id, name)
            if named is not None:
                return named  # `test_loader`, `X_val`: the data says its split
        found = []
        for d in sorted(defs, key=lambda d: (getattr(d.node, "lineno", 0), getattr(d.node, "col_offset", 0))):
            if d in backs:
                found.append(Origin(TRAIN, backs[d][0], backs[d][1], name.id))
                continue
            found.append(self._def(d, name, env, depth))
        got = _join(found)
        if got is CONST and scope is not self.ix.tree:  # a list filled with .append(...) in this scope
            appended = [self.of(c.args[0], env, depth + 1) for c in self.ix.scope_nodes(scope)
                        if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute)
                        and c.func.attr == "append" and len(c.args) == 1
                        and isinstance(c.func.value, ast.Name) and c.func.value.id == name.id]
            if appended:
                got = _join(appended)
        if got is None:
            return self._named(name.id, name)
        return got

    def _meter(self, meter: ast.Name, env: _Env, depth: int) -> Origin | None:
        """``losses.avg`` of a running-average object fed with ``losses.update(loss.item(), n)`` in the same
        function: what it was fed with."""
        scope = self.values.scope(meter)
        fed = [self.of(c.args[0], env, depth + 1) for c in self.ix.scope_nodes(scope)
               if isinstance(c, ast.Call) and isinstance(c.func, ast.Attribute) and c.func.attr in ("update", "add")
               and c.args and isinstance(c.func.value, ast.Name) and c.func.value.id == meter.id]
        return _join(fed) if fed else None

    def _named(self, text: str, node: ast.AST) -> Origin | None:
        """A data name whose definition says nothing: the split its name says."""
        kind = role(text) if is_data_name(text) else None
        return Origin(kind, node, "data", text) if kind else None

    def _def(self, d: Def, name: ast.Name, env: _Env, depth: int) -> Origin | None:
        if d.kind == "assign":
            value = d.value
            if d.index is not None:
                if isinstance(value, (ast.Tuple, ast.List)) and d.index < len(value.elts):
                    return self.of(value.elts[d.index], env, depth + 1)
                if isinstance(value, ast.Call):
                    return self._call(value, env, depth, index=d.index)
                return None
            if isinstance(value, (ast.List, ast.Dict)) and not getattr(value, "elts", getattr(value, "keys", None)):
                return CONST  # an empty list or dict, filled later
            return self.of(value, env, depth + 1)
        if d.kind == "aug":
            return self.of(d.value, env, depth + 1)
        if d.kind in ("for", "comp"):
            return self.of(d.value, env, depth + 1)
        if d.kind == "param":
            bound = env.get(d.node.arg)
            if bound is None:
                return self._named(d.node.arg, d.node)
            expr, outer = bound
            return self.of(expr, outer, depth + 1)
        return None

    # -- calls ------------------------------------------------------------------------
    def _call(self, call: ast.Call, env: _Env, depth: int, index: int | None = None) -> Origin | None:
        func = call.func
        last = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
        if last in _COUNTS:
            return CONST
        callee = self._callee(call)
        if callee is not None:
            return self._returns(callee, call, env, depth, index)
        if index is not None:
            return None  # one element of what an unknown function returns
        parts = list(call.args) + [kw.value for kw in call.keywords]
        if isinstance(func, ast.Attribute) and not self._is_object(func.value):
            parts.insert(0, func.value)  # loss.item(), out.argmax(1): the tensor the method is called on
        found = []
        for p in parts:
            got = self.of(p, env, depth + 1)
            text = dotted(p)
            if got is None and text is not None and not is_data_name(text):
                continue  # a model, a device, a config handed to the function: not data
            found.append(got)
        return _join(found)

    def _is_object(self, expr: ast.AST) -> bool:
        """A receiver that is a module, an optimizer or a namespace, not a tensor: ``model``, ``F``,
        ``torch``, ``np``, ``self.criterion``."""
        text = dotted(expr)
        if text is None:
            return False
        root = text.split(".")[0]
        return root in self.ix.aliases or root == "self" or self.ix.is_model(text) or text in self.ix.losses \
            or root in ("np", "torch", "F", "math", "statistics")

    def _callee(self, call: ast.Call) -> FuncNode | None:
        return self.ix.callee(call)

    def _returns(self, func: FuncNode, call: ast.Call, env: _Env, depth: int, index: int | None) -> Origin | None:
        params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]]
        if params and params[0] in ("self", "cls") and isinstance(call.func, ast.Attribute):
            params = params[1:]
        inner: _Env = {}
        for p, a in zip(params, call.args):
            if not isinstance(a, ast.Starred):
                inner[p] = (a, env)
        for kw in call.keywords:
            if kw.arg:
                inner[kw.arg] = (kw.value, env)
        found = []
        for node in self.ix.scope_nodes(func):
            if isinstance(node, ast.Return) and node.value is not None:
                value = node.value
                if index is not None:
                    if not (isinstance(value, ast.Tuple) and index < len(value.elts)):
                        return None
                    value = value.elts[index]
                found.append(self.of(value, inner, depth + 1))
        return _join(found) if found else None


def sources_for(ix: FileIndex) -> Sources:
    """The (cached) origin analysis of one file."""
    an = ix.cache.get("sources")
    if an is None:
        an = ix.cache["sources"] = Sources(ix)
    return an
