"""A running best that the improvement test cannot track (OVT710 ``best-value-not-tracked``), and a best
model copied and never used (OVT815 ``best-model-not-restored``), issue 33.

The decisions of :mod:`overt.lint.rules.selection` (save the best model, reset the patience
counter) are only as good as the running best they compare with.  Three ways it stops meaning
"the best so far", each provable from the code alone:

- initialised on the wrong side: ``best_acc = float("inf")`` with ``acc > best_acc`` (or a loss's
  best at ``-inf`` or ``0`` with ``loss < best``), and only the improvement branch ever sets it:
  the test is never true, nothing is saved, the patience counter grows every evaluation;
- never updated: every assignment in the file is the constant it starts from, so every evaluation
  that beats the start counts as an improvement: the last model is kept, the counter never grows;
- updated just before the test: ``best = min(best, loss)`` (or ``best = loss``) and then
  ``if loss < best:``: never true; the same followed through one call by :mod:`overt.lint.rules.bestflow`
  (an ``evaluate()`` that keeps the best and returns the metric, then a patience check handed both).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.bestflow import constant_test
from overt.lint.rules.plateau import direction
from overt.lint.rules.selection import Improvement, improvement_tests


def _number(node: ast.AST | None) -> float | None:
    """The number a constant expression stands for: ``0``, ``-1e9``, ``float('inf')``, ``-np.inf``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
        return float(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        inner = _number(node.operand)
        return None if inner is None else (-inner if isinstance(node.op, ast.USub) else inner)
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "float" \
            and len(node.args) == 1 and isinstance(node.args[0], ast.Constant) \
            and isinstance(node.args[0].value, str) and node.args[0].value.strip().lower() in (
                "inf", "+inf", "-inf", "infinity", "-infinity"):
        return float(node.args[0].value)
    if isinstance(node, ast.Attribute) and node.attr == "inf" and dotted(node.value) in (
            "np", "numpy", "math", "torch"):
        return float("inf")
    return None


def _wants_above(t: Improvement) -> bool | None:
    """Does the metric improve by rising above the best (``acc > best``), given which branch of the ``if``
    keeps the new best?  None when that cannot be told."""
    op = t.cmp.ops[0]
    metric_left = t.cmp.left is t.metric
    rises = isinstance(op, (ast.Gt, ast.GtE))
    above = rises if metric_left else isinstance(op, (ast.Lt, ast.LtE))
    if isinstance(t.node, ast.Assign):
        return above
    if t.node.test is not t.cmp:
        return None  # part of a longer condition (`best is None or ...`)
    if _sets(t.node.body, t.best_text):
        return above
    if _sets(t.node.orelse, t.best_text):
        return not above
    return None


def _sets(stmts: list[ast.stmt], text: str) -> bool:
    for node in (n for s in stmts for n in ast.walk(s)):
        if isinstance(node, ast.Assign) and any(dotted(e) == text for t in node.targets
                                                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t])):
            return True
    return False


def _scope_of(ix: FileIndex, t: Improvement) -> ast.AST:
    """Where the best is bound: its function for a plain name (the module at top level), its class for
    ``self.x``, the file for anything else."""
    if "." not in t.best_text:
        return ix.enclosing_function(t.node) or ix.tree
    if t.best_text.startswith("self."):
        return ix.enclosing_class(t.node) or ix.tree
    return ix.tree


def _assignments(ix: FileIndex, t: Improvement) -> list[ast.AST] | None:
    """Every statement that gives the best a value in its scope, or None where it may be changed out of sight
    (an augmented assignment, a ``for``/``with`` target, a ``global``/``nonlocal`` declaration)."""
    out = []
    text = t.best_text
    scope = _scope_of(ix, t)
    if scope is not ix.tree and any(isinstance(n, (ast.Global, ast.Nonlocal)) and text in n.names
                                    for n in ast.walk(scope)):
        return None
    for node in ast.walk(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for e in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    if dotted(e) == text:
                        out.append(node)
        elif isinstance(node, ast.AugAssign) and dotted(node.target) == text:
            return None
        elif isinstance(node, (ast.For, ast.AsyncFor, ast.With, ast.NamedExpr)):
            if any(dotted(n) == text for n in ast.walk(getattr(node, "target", node)) if isinstance(n, (
                    ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)):
                return None
    return out


def _value_of(stmt: ast.AST, text: str) -> ast.AST | None:
    """The value ``stmt`` gives ``text`` (the element of a tuple assignment)."""
    targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
    for t in targets:
        if isinstance(t, (ast.Tuple, ast.List)):
            for i, e in enumerate(t.elts):
                if dotted(e) == text:
                    v = stmt.value
                    return v.elts[i] if isinstance(v, (ast.Tuple, ast.List)) and i < len(v.elts) else None
        elif dotted(t) == text:
            return stmt.value
    return None


def _includes(value: ast.AST, metric: str) -> bool:
    """Does ``value`` already take the metric in: the metric itself, ``min/max(..., metric)``, or a
    conditional whose both branches do?"""
    if ast.dump(value) == metric:
        return True
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("min", "max"):
        return any(ast.dump(a) == metric for a in value.args)
    if isinstance(value, ast.IfExp):
        return _includes(value.body, metric) and _includes(value.orelse, metric)
    return False


def _param_default(ix: FileIndex, t: Improvement) -> ast.expr | None:
    """The default value of the best when it is a parameter of the function the test is in."""
    func = ix.enclosing_function(t.node)
    if func is None or "." in t.best_text:
        return None
    a = func.args
    positional = [*a.posonlyargs, *a.args]
    pairs = list(zip(positional[len(positional) - len(a.defaults):], a.defaults)) + [
        (k, d) for k, d in zip(a.kwonlyargs, a.kw_defaults) if d is not None]
    default = next((d for arg, d in pairs if arg.arg == t.best_text), None)
    if default is None:
        return None
    index = next((i for i, arg in enumerate(positional) if arg.arg == t.best_text), None)
    for call in ix.call_sites(func):  # a caller that passes its own starting value
        if kwarg(call, t.best_text) is not None or (index is not None and len(call.args) > index) \
                or any(kw.arg is None for kw in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
            return None
    return default


def _is_loss(text: str) -> bool:
    return direction(text.rsplit(".", 1)[-1]) == "min"


@rule("best-value-not-tracked")
def best_value_not_tracked(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for t in improvement_tests(ix):
        if id(t.node) in seen or not (dotted(t.best) == t.best_text):
            continue  # `best - delta`, `best.item()`: only a plain name or attribute is followed
        if t.best_text.startswith("self."):
            func = ix.enclosing_function(t.node)
            cls = ix.enclosing_class(func) if func is not None else None
            if cls is None or any(dotted(b) not in ("object", "nn.Module", "torch.nn.Module", "Module")
                                  for b in cls.bases):
                continue
        hit = _stuck(ix, t) or _never_updated(ix, t) or _updated_before(ix, t) or _updated_through(ix, t)
        if hit is not None:
            seen.add(id(t.node))
            yield hit
    yield from _never_compared(ix)


_BEST_WORDS = frozenset({"best", "min", "max", "lowest", "highest", "minimum", "maximum"})
_SHOWN = frozenset({"print", "info", "debug", "warning", "log", "write", "format", "add_scalar", "log_metrics",
                    "set_postfix", "set_description"})


def _shown_only(ix: FileIndex, node: ast.AST) -> bool:
    """Is ``node`` (a read) only shown: inside an f-string, or an argument of print/logging/format?"""
    cur = ix.parents.get(node)
    while cur is not None and not isinstance(cur, ast.stmt):
        if isinstance(cur, ast.JoinedStr):
            return True
        if isinstance(cur, ast.Call):
            f = cur.func
            last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            return last in _SHOWN
        cur = ix.parents.get(cur)
    return False


def _saves(scope: ast.AST) -> ast.Call | None:
    for n in ast.walk(scope):
        if isinstance(n, ast.Call) and dotted(n.func) in ("torch.save", "save_checkpoint", "self.save_checkpoint"):
            return n
    return None


_DECIDING_CALLS = ("less", "greater", "better", "improv", "monitor_op", "isclose")


def _decides(scope: ast.AST) -> bool:
    """Does ``scope`` hold any ordering test (``a < b``, ``np.less(a, b)``, ``self.is_better(...)``)?"""
    for n in ast.walk(scope):
        if isinstance(n, ast.Compare) and any(isinstance(op, (ast.Lt, ast.Gt, ast.LtE, ast.GtE)) for op in n.ops):
            return True
        if isinstance(n, ast.Call):
            name = (dotted(n.func) or "").rsplit(".", 1)[-1].lower()
            if any(w in name for w in _DECIDING_CALLS):
                return True
    return False


def _never_compared(ix: FileIndex) -> Iterator[Hit]:
    """A running best started at +-inf, set to each new value, and read by no test: every evaluation is kept."""
    inits: dict[str, ast.AST] = {}
    updates: dict[str, list[ast.AST]] = {}
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1:
            continue
        text = dotted(node.targets[0])
        if not text or text.count(".") > 1 or ("." in text and not text.startswith("self.")):
            continue
        if not set(tokens(text)) & _BEST_WORDS:
            continue
        if _number(node.value) in (float("inf"), float("-inf")):
            inits.setdefault(text, node)
        elif isinstance(node.value, (ast.Name, ast.Attribute)) and ix.enclosing_function(node) is not None:
            updates.setdefault(text, []).append(node)
    for text, init in inits.items():
        ups = updates.get(text)
        if not ups:
            continue
        attr = text.split(".")[-1]
        reads = [n for n in ast.walk(ix.tree) if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Load)
                 and ((isinstance(n, ast.Attribute) and n.attr == attr and "." in text)
                      or (isinstance(n, ast.Name) and n.id == text and "." not in text))]
        if any(not _shown_only(ix, n) for n in reads):
            continue  # compared, passed on or computed with somewhere: an improvement test may read it
        if "." in text:
            scope = ix.enclosing_class(ups[0])
            if scope is None or ix.enclosing_class(init) is not scope:
                continue
        else:
            scope = ix.enclosing_function(ups[0]) or ix.tree
        save = _saves(scope)
        if save is None or _decides(scope):
            continue  # nothing saved, or another test decides what is kept (a best printed beside the real one)
        up = ups[0]
        yield Hit("best-value-not-tracked", up,
                  f"`{text}` is kept as the running best (it starts at {ix.segment(init.value)}, line {init.lineno}) "
                  f"and set to `{ix.segment(up.value)}` at line {up.lineno}, but no comparison in this file ever "
                  f"reads it: nothing decides whether an evaluation improved, so the checkpoint saved beside it "
                  f"(line {save.lineno}) is written at every evaluation, the model kept as the best is the last one, "
                  f"and a patience counter never counts",
                  fix=f"compare first (`if {ix.segment(up.value)} < {text}:` for a loss), and save and update "
                  f"`{text}` only in that branch; count the evaluations without improvement in the other")


def _stuck(ix: FileIndex, t: Improvement) -> Hit | None:
    """Initialised where the test can never beat it, and set only in the improvement branch."""
    above = _wants_above(t)
    assigns = _assignments(ix, t)
    if above is None or not assigns or not isinstance(t.node, ast.If):
        return None
    better = t.node.body if _sets(t.node.body, t.best_text) else t.node.orelse
    inside = {id(n) for s in better for n in ast.walk(s)}
    inits = [a for a in assigns if id(a) not in inside]
    values = [_number(_value_of(a, t.best_text)) for a in inits]
    default = _param_default(ix, t)
    if default is not None:  # def train_model(..., best_acc=float('inf'))
        inits.append(default)
        values.append(_number(default))
    if not inits or any(v is None for v in values):
        return None
    metric = ix.segment(t.metric)
    if above and all(v == float("inf") for v in values):
        start, why = "+inf", f"no `{metric}` is ever greater than +inf"
    elif not above and all(v == float("-inf") for v in values):
        start, why = "-inf", f"no `{metric}` is ever below -inf"
    elif not above and all(v == 0 for v in values) and (_is_loss(t.best_text) or _is_loss(metric)) \
            and not isinstance(t.cmp.ops[0], ast.LtE) and not isinstance(t.cmp.ops[0], ast.GtE):
        start, why = "0", f"a loss is never below 0, so `{metric}` never is"
    else:
        return None
    fix = "float('-inf')" if above else "float('inf')"
    return Hit("best-value-not-tracked", t.cmp,
               f"`{t.best_text}` starts at {start} (line {inits[0].lineno}) and only the improvement branch of "
               f"`{ix.segment(t.cmp)}` (line {t.cmp.lineno}) sets it, but {why}: the test is never true, so no best "
               f"model is ever kept and every evaluation counts as one without improvement",
               fix=f"start `{t.best_text}` at {fix} (the side every {'score' if above else 'loss'} beats)")


def _never_updated(ix: FileIndex, t: Improvement) -> Hit | None:
    """Every assignment of the best is a constant outside any loop: it never follows the metric."""
    assigns = _assignments(ix, t)
    if not assigns:
        return None
    for a in assigns:
        if _number(_value_of(a, t.best_text)) is None or ix.enclosing_loops(a):
            return None
    return Hit("best-value-not-tracked", t.cmp,
               f"`{ix.segment(t.cmp)}` (line {t.cmp.lineno}) compares with `{t.best_text}`, but nothing ever sets "
               f"`{t.best_text}` after its start (line {assigns[0].lineno}): every evaluation that beats the starting "
               f"value counts as an improvement, so the model kept is the last one, not the best, and a patience "
               f"counter is reset every time",
               fix=f"set `{t.best_text} = {ix.segment(t.metric)}` where the improvement is recorded")


def _updated_before(ix: FileIndex, t: Improvement) -> Hit | None:
    """``best = min(best, loss)`` (or ``best = loss``) just before ``if loss < best:``: never true."""
    if not isinstance(t.node, ast.If) or not isinstance(t.cmp.ops[0], (ast.Lt, ast.Gt)):
        return None
    parent = ix.parents.get(t.node)
    block = next((getattr(parent, f) for f in ("body", "orelse", "finalbody")
                  if isinstance(getattr(parent, f, None), list) and t.node in getattr(parent, f)), None)
    if block is None:
        return None
    before = block[:block.index(t.node)]
    metric = ast.dump(t.metric)
    for stmt in reversed(before):
        if not isinstance(stmt, ast.Assign) or not any(dotted(x) == t.best_text for x in stmt.targets):
            if isinstance(stmt, (ast.Assign, ast.AugAssign)) and any(
                    dotted(n) in (t.best_text, dotted(t.metric)) for n in ast.walk(stmt)
                    if isinstance(n, (ast.Name, ast.Attribute)) and isinstance(n.ctx, ast.Store)):
                return None
            continue
        if not _includes(stmt.value, metric):
            return None
        return Hit("best-value-not-tracked", t.cmp,
                   f"`{t.best_text}` is updated from `{ix.segment(t.metric)}` at line {stmt.lineno}, before "
                   f"`{ix.segment(t.cmp)}` (line {t.cmp.lineno}) compares them: the metric can never be strictly "
                   f"better than a best that already includes it, so the test is never true and no best model is kept",
                   fix=f"compare first, then update `{t.best_text}` inside the improvement branch")
    return None


def _updated_through(ix: FileIndex, t: Improvement) -> Hit | None:
    """The best already holds the metric when the test reads it, proved through one call (bestflow)."""
    found = constant_test(ix, t.node, t.cmp, t.best, t.metric)
    if found is None:
        return None
    how = {"same": "set to it", "min": "kept as the smaller of the two", "max": "kept as the larger of the two"}
    where = f"at line {found.proof.stmt.lineno}"
    if found.proof.method is not None:
        where = f"in `{found.proof.method.name}()` (line {found.proof.stmt.lineno}), which returns the metric it kept"
    via = f"the improvement test `{ix.segment(t.cmp)}` (line {t.cmp.lineno}) then compares them"
    if found.call is not None:
        via = (f"both are then handed to `{ix.segment(found.call.func)}()` (line {found.call.lineno}), whose "
               f"improvement test `{ix.segment(t.cmp)}` (line {t.cmp.lineno}) compares them")
    return Hit("best-value-not-tracked", t.cmp,
               f"`{found.best}` is updated from `{found.metric}` ({how[found.kind]}) {where}; {via}: the "
               f"metric can never be strictly better than a best that already includes it, so no evaluation "
               f"counts as an improvement: no best model is kept on it, and a patience counter it drives is never "
               f"reset, so the run stops after `patience` evaluations however fast it improves",
               fix=f"compare first: read the best before it is updated (keep `previous = {found.best}` before the "
                   f"update and compare with it), or update `{found.best}` only after the test")


# -- OVT815: the best snapshot is kept and never used --------------------------------------------------------
_SNAPSHOT_WORDS = frozenset({"state", "states", "model", "weights", "params", "wts", "dict", "net", "ckpt",
                             "checkpoint", "snapshot", "parameters"})


def _is_copy(value: ast.AST) -> bool:
    """``copy.deepcopy(...)``, ``{k: v.clone() ...}``, ``{k: v.cpu().clone() ...}``, ``x.state_dict()``."""
    if isinstance(value, ast.Call):
        last = value.func.attr if isinstance(value.func, ast.Attribute) else \
            value.func.id if isinstance(value.func, ast.Name) else ""
        return last in ("deepcopy", "state_dict", "clone")
    if isinstance(value, ast.DictComp):
        return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
            "clone", "detach", "cpu", "copy") for n in ast.walk(value.value))
    return False


@rule("best-model-not-restored")
def best_model_not_restored(ix: FileIndex) -> Iterator[Hit]:
    candidates = []  # (name node, its text, the improvement test)
    for t in improvement_tests(ix):
        if not isinstance(t.node, ast.If):
            continue
        for stmt in (n for s in [*t.node.body, *t.node.orelse] for n in ast.walk(s)):
            if not isinstance(stmt, ast.Assign):
                continue
            for target in stmt.targets:
                for e in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                    text = dotted(e)
                    if not text or "." in text:
                        continue  # an attribute (`self.best_state`) may be read by code this file does not show
                    toks = set(tokens(text))
                    value = _value_of(stmt, text)
                    if "best" in toks and toks & _SNAPSHOT_WORDS and value is not None and _is_copy(value):
                        candidates.append((e, text, t))
    if not candidates:
        return
    dynamic = ("locals", "globals", "vars", "eval", "exec")
    if any(isinstance(c.func, ast.Name) and c.func.id in dynamic for c in ix.calls) or any(
            isinstance(n, ast.Global) for n in ix.kids):
        return  # names read out of sight
    loads = {n.id for n in ix.kids if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
    seen: set[str] = set()
    for e, text, t in candidates:
        if text in loads or text in seen:
            continue
        seen.add(text)
        yield Hit("best-model-not-restored", e,
                  f"`{text}` keeps a copy of the best model each time `{ix.segment(t.cmp)}` holds (line "
                  f"{t.cmp.lineno}), but nothing in this file ever reads it: the model evaluated, saved "
                  f"or returned after training is the last one, not the best one that was selected",
                  fix=f"restore it after training (`model.load_state_dict({text})`) or return it")
