"""Decisions that pick or stop a model must read held-out quantities (issue 33): a best checkpoint,
an early stop or a plateau scheduler decided on the training data (OVT708 ``selection-on-train-data``)
or on the test set while a validation set exists (OVT709 ``selection-on-test-data``).

A *decision* is one of: an improvement test against a running best (``if loss < best_loss:``
whose branches save or copy the model, reset a patience counter or stop; ``is_best = acc >
best_acc``), an early-stopping object called with the quantity (``early_stopping(loss, model)``,
``stopper.step(loss)``), ``ReduceLROnPlateau.step(x)``, and Lightning's ``EarlyStopping`` /
``ModelCheckpoint`` / scheduler ``monitor`` key.  Where the quantity comes from is proven by
:mod:`overt.lint.analysis.sources` (the loss ``backward()`` trains on, or data whose name says its
split); a quantity whose source is not proven, a script without a validation set, a test set that
is the only held-out data: the rule stays silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass

from overt.lint.analysis.sources import TEST, TRAIN, VAL, Origin, is_data_name, role, sources_for
from overt.lint.index import MODEL_TOKENS, FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.earlystop import _walk
from overt.lint.rules.plateau import direction

_ORDER = (ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_SAVES = ("save", "save_checkpoint", "save_model", "save_pretrained", "save_weights", "state_dict", "deepcopy",
          "save_state", "save_state_dict", "checkpoint", "save_best", "save_best_model", "dump")
_STATE_WORDS = frozenset({"model", "state", "states", "weights", "params", "ckpt", "checkpoint", "net", "wts",
                          "dict"})
_WHEN_WORDS = frozenset({"epoch", "iter", "step", "iteration"})
_COUNTER_WORDS = frozenset({"patience", "wait", "counter", "count", "bad", "trigger", "triggers", "stale", "no",
                            "since", "plateau", "strikes", "stop", "epochs", "steps"})
_STOP_METHODS = ("step", "update", "check", "early_stop", "__call__", "should_stop", "is_stop", "stop")
_SWITCH_WORDS = ("train_only", "without_val", "no_val", "use_val", "do_val", "has_val", "with_val", "skip_val",
                 "validation", "validate", "vali")
_TRAIN_HOOKS = ("training_step", "on_train_epoch_end", "training_epoch_end", "on_train_batch_end")
_VAL_HOOKS = ("validation_step", "on_validation_epoch_end", "validation_epoch_end", "on_validation_batch_end")


def _best_like(text: str | None) -> bool:
    """A running best: ``best``, ``self.best_score``, ``min_val_loss`` (min/max/lowest/highest only with a
    metric's name: ``max_epochs`` is a limit, not a best)."""
    if not text:
        return False
    toks = tokens(text)
    return "best" in toks or (any(t in ("lowest", "highest", "min", "max") for t in toks)
                              and direction(text.rsplit(".", 1)[-1]) is not None)


def _stops_on(ix: FileIndex, text: str) -> bool:
    """Is ``text`` read by the test of an ``if`` that breaks, returns or raises?"""
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.If) and any(dotted(n) == text for n in ast.walk(node.test)) and any(
                isinstance(n, (ast.Break, ast.Return, ast.Raise)) for s in node.body for n in ast.walk(s)):
            return True
    return False


def _acts(ix: FileIndex, branch: list[ast.stmt], other: list[ast.stmt]) -> ast.AST | None:
    """What in an improvement test's branches makes it a decision: a save or copy of the model, a
    best state or epoch kept, a patience counter reset (incremented in the other branch), a stop."""
    bumped = {dotted(n.target) for n in _walk(other) if isinstance(n, ast.AugAssign)}
    for node in _walk(branch):
        if isinstance(node, ast.Call):
            f = node.func
            last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if last in _SAVES or last.startswith("save"):
                return node
        if isinstance(node, ast.Assign):
            for t in node.targets:
                for e in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    text = dotted(e) or ""
                    toks = set(tokens(text))
                    if "best" in toks and toks & _STATE_WORDS:
                        return node
                    if "best" in toks and toks & _WHEN_WORDS and _stops_on(ix, text):
                        return node  # best_epoch = epoch, then `if epoch - best_epoch > patience: break`
                    if text in bumped or (toks & _COUNTER_WORDS and "best" not in toks):
                        return node
    for node in _walk(other):
        if isinstance(node, ast.AugAssign) and set(tokens(dotted(node.target) or "")) & _COUNTER_WORDS:
            return node
    return None


@dataclass(frozen=True)
class Improvement:
    """An improvement test that decides: ``node`` (the ``if`` or the ``is_best = ...`` assignment), the
    comparison, its best side (``best``, its text) and its metric side."""

    node: ast.stmt
    cmp: ast.Compare
    best: ast.expr
    best_text: str
    metric: ast.expr


def improvement_tests(ix: FileIndex) -> list[Improvement]:
    """Every comparison of a metric with a running best whose branches save, copy or stop the model
    (cached per file)."""
    found = ix.cache.get("improvement-tests")
    if found is not None:
        return found
    found = ix.cache["improvement-tests"] = []
    for node in ix.kids:  # every node of the file, walked once by the index
        if isinstance(node, ast.If):
            test, body, orelse = node.test, node.body, node.orelse
        elif isinstance(node, ast.Assign) and isinstance(node.value, ast.Compare) and any(
                set(tokens(dotted(t) or "")) & {"best", "improved", "improvement", "better"} for t in node.targets):
            test, body, orelse = node.value, [node], []
        else:
            continue
        for cmp in (n for n in ast.walk(test) if isinstance(n, ast.Compare) and len(n.ops) == 1
                    and isinstance(n.ops[0], _ORDER)):
            left, right = cmp.left, cmp.comparators[0]
            for best, metric in ((right, left), (left, right)):
                btext = _side_text(best)
                if not btext or not _best_like(btext) or _best_like(_side_text(metric)):
                    continue
                act = node if isinstance(node, ast.Assign) else (_acts(ix, body, orelse) or _acts(ix, orelse, body))
                if act is not None:
                    found.append(Improvement(node, cmp, best, btext, metric))
    return found


def _improvement_sites(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """(site, quantity, what the decision is) for each comparison with a running best that decides."""
    for t in improvement_tests(ix):
        yield t.cmp, t.metric, (f"compared with the running best `{t.best_text}` to decide which model is kept or "
                                f"when to stop")


def _side_text(expr: ast.AST) -> str | None:
    """The name on one side of a comparison: ``best``, ``self.best_loss``, ``best - delta``."""
    if isinstance(expr, ast.BinOp):
        return _side_text(expr.left) or _side_text(expr.right)
    if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute) and expr.func.attr == "item":
        return _side_text(expr.func.value)
    if isinstance(expr, ast.Subscript):
        return _side_text(expr.value)
    return dotted(expr)


def _plateau_sites(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    names = set()
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        parent = ix.parents.get(call)
        if q.endswith("ReduceLROnPlateau") and isinstance(parent, ast.Assign):
            names.update(dotted(t) for t in parent.targets if dotted(t))
    for call in ix.calls:
        if isinstance(call.func, ast.Attribute) and call.func.attr == "step" and dotted(call.func.value) in names:
            metric = kwarg(call, "metrics") or (call.args[0] if call.args else None)
            if metric is not None:
                yield call, metric, "given to ReduceLROnPlateau.step() to decide when to cut the learning rate"


def _stopper_names(ix: FileIndex) -> dict[str, str]:
    """Names holding an early-stopping object -> the class name they were made from."""
    names = {}
    for text, values in ix.assigns.items():
        for v in values:
            if isinstance(v, ast.Call):
                ctor = (dotted(v.func) or "").rsplit(".", 1)[-1]
                low = ctor.lower()
                if ("earlystop" in low or "stopper" in low or "early_stop" in low) and not _lightning_callback(ix, v):
                    names[text] = ctor
    return names


def _lightning_callback(ix: FileIndex, call: ast.Call) -> bool:
    q = ix.qualname(call.func) or ""
    return kwarg(call, "monitor") is not None or "lightning" in q or "keras" in q


def _stopper_sites(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    names = _stopper_names(ix)
    if not names:
        return
    for call in ix.calls:
        f = call.func
        if dotted(f) in names:
            obj, method = dotted(f), "__call__"
        elif isinstance(f, ast.Attribute) and f.attr in _STOP_METHODS and dotted(f.value) in names:
            obj, method = dotted(f.value), f.attr
        else:
            continue
        metric = _stopper_metric(ix, call, names[obj], method)
        if metric is not None:
            yield call, metric, f"given to the early stopper `{ix.segment(f)}` to decide when to stop"


def _stopper_metric(ix: FileIndex, call: ast.Call, cls_name: str, method: str) -> ast.expr | None:
    """The argument of an early stopper's call that its improvement test compares: read from the class when
    this file defines it, else the one argument that is not the model."""
    cls = ix.classes.get(cls_name)
    func = next((m for m in (cls.body if cls is not None else ()) if isinstance(m, ast.FunctionDef)
                 and m.name == method), None)
    if func is not None:
        params = [a.arg for a in func.args.args][1:]
        used = set()
        for t in improvement_tests(ix):
            if any(a is func for a in ix.ancestors(t.node)):
                used |= _params_read(ix, t.metric, set(params))
        if len(used) != 1:
            return None
        param = used.pop()
        pos = params.index(param)
        return call.args[pos] if pos < len(call.args) else kwarg(call, param)
    quantities = [a for a in call.args if not ix.is_model(dotted(a)) and not any(
        t in MODEL_TOKENS for t in tokens(dotted(a) or "_"))] + [kw.value for kw in call.keywords if kw.arg and any(
            w in kw.arg for w in ("loss", "score", "metric", "acc", "val"))]
    return quantities[0] if len(quantities) == 1 else None


def _params_read(ix: FileIndex, expr: ast.AST, params: set[str], depth: int = 0) -> set[str]:
    """The parameters ``expr`` is computed from, through the assignments of its function (a few hops)."""
    out = set()
    for n in ast.walk(expr):
        if not isinstance(n, ast.Name):
            continue
        if n.id in params:
            out.add(n.id)
        elif depth < 3:
            for v in ix.assigns.get(n.id, []):
                if ix.enclosing_function(v) is ix.enclosing_function(expr):
                    out |= _params_read(ix, v, params, depth + 1)
    return out


def _val_evidence(ix: FileIndex, site: ast.AST, origin: Origin) -> ast.AST | None:
    """A validation quantity or validation data in the function (or module) the decision is made in."""
    func = ix.enclosing_function(site)
    loops = ix.enclosing_loops(site)
    src = sources_for(ix)
    for scope in [*loops[-1:], func if func is not None else ix.tree]:  # the epoch loop first
        found = _val_in(ix, scope, src, site)
        if found is not None:
            return found
    return None


def _apart(ix: FileIndex, a: ast.AST, b: ast.AST) -> bool:
    """Are ``a`` and ``b`` in different branches of one ``if`` (``if use_val: stop(val_loss) else:
    stop(train_loss)``)?"""
    chain_a = [a, *ix.ancestors(a)]
    index = {id(n): i for i, n in enumerate(chain_a)}
    prev = b
    for anc in ix.ancestors(b):
        if id(anc) in index:
            if isinstance(anc, ast.If):
                below_a = chain_a[index[id(anc)] - 1] if index[id(anc)] > 0 else a
                return (below_a in anc.body) != (prev in anc.body)
            return False
        prev = anc
    return False


def _validation_switch(ix: FileIndex, site: ast.AST) -> ast.AST | None:
    """An ``if`` around the decision that asks about validation (``if not args.train_only``, ``if
    vali_loader is None``, ``if args.val``): the author chose the training quantity for a run without one."""
    for anc in ix.ancestors(site):
        if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return None
        if isinstance(anc, ast.If):
            for n in ast.walk(anc.test):
                text = (dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None) or ""
                low = text.lower()
                if role(text) == VAL or VAL in tokens(text) or any(w in low for w in _SWITCH_WORDS):
                    return anc
    return None


def _val_in(ix: FileIndex, scope: ast.AST, src, site: ast.AST) -> ast.AST | None:
    for node in ix.scope_nodes(scope):
        if _apart(ix, node, site):
            continue
        if isinstance(node, (ast.Name, ast.Attribute)):
            text = dotted(node) or ""
            if role(text) != VAL:
                continue
            if is_data_name(text):
                return node
            if isinstance(node.ctx, ast.Store) and direction(text.rsplit(".", 1)[-1]) is not None:
                # val_loss = ..., valid_acc = ...: a validation quantity computed here
                parent = ix.parents.get(node)
                value = getattr(parent, "value", None)
                got = src.origin(value) if value is not None else None
                if got is None or got.kind == VAL:
                    return node
    return None


def _test_evidence(ix: FileIndex, site: ast.AST) -> ast.AST | None:
    """Validation data in the function of the decision (the module, for top-level code): a loader, data set
    or tensor whose name says validation, or a split taken by its name (``ds["validation"]``)."""
    func = ix.enclosing_function(site)
    for node in ast.walk(func if func is not None else ix.tree):
        text = dotted(node) if isinstance(node, (ast.Name, ast.Attribute)) else None
        if text and role(text) == VAL and is_data_name(text):
            return node
        if isinstance(node, ast.arg) and role(node.arg) == VAL and is_data_name(node.arg):
            return node
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) \
                and isinstance(node.slice.value, str) and role(node.slice.value) == VAL \
                and is_data_name(dotted(node.value) or "data"):
            return node  # dataset["validation"]
    return None


def _held_out(ix: FileIndex, ev: ast.AST) -> str:
    text = ix.segment(ev)
    return f"a quantity computed from `{text}`" if is_data_name(text) else f"the validation quantity (`{text}`)"


def _proof(ix: FileIndex, o: Origin) -> str:
    if o.how == "backward":
        return f"it is the loss that `{ix.segment(o.node)}` (line {o.node.lineno}) trains on"
    if o.how == "step":
        return f"it is computed in the training step, from what `{ix.segment(o.node)}` (line {o.node.lineno}) " \
               f"backpropagates through"
    return f"it is computed from `{o.text or ix.segment(o.node)}` (line {getattr(o.node, 'lineno', '?')})"


@rule("selection-on-train-data")
def selection_on_train_data(ix: FileIndex) -> Iterator[Hit]:
    yield from _judge(ix, TRAIN)
    yield from _lightning(ix)
    yield from _skorch(ix)


@rule("selection-on-test-data")
def selection_on_test_data(ix: FileIndex) -> Iterator[Hit]:
    yield from _judge(ix, TEST)
    yield from _framework_eval_on_test(ix)


_SELECTING_CALLBACKS = ("ModelCheckpoint", "EarlyStopping", "EarlyStoppingCallback")


def _framework_eval_on_test(ix: FileIndex) -> Iterator[Hit]:
    """Lightning's ``trainer.fit(model, train, val_dataloaders=test_loader)`` or the Hugging Face Trainer's
    ``eval_dataset=ds["test"]``, where that evaluation chooses the model (a monitoring checkpoint or early
    stopping callback, ``load_best_model_at_end=True``) and the file also has validation data."""
    if not any(_selects(ix, c) for c in ix.calls):
        return  # nothing in the file picks a model from the framework's evaluation
    for scope in [*(f for fs in ix.functions.values() for f in fs), ix.tree]:
        yield from _framework_scope(ix, scope)


def _selects(ix: FileIndex, call: ast.Call) -> bool:
    """A monitoring checkpoint, an early-stopping callback or ``load_best_model_at_end=True``."""
    last = (dotted(call.func) or "").rsplit(".", 1)[-1]
    if last in _SELECTING_CALLBACKS and (last != "ModelCheckpoint" or kwarg(call, "monitor") is not None):
        return True
    best = kwarg(call, "load_best_model_at_end")
    return isinstance(best, ast.Constant) and best.value is True


def _framework_scope(ix: FileIndex, scope: ast.AST) -> Iterator[Hit]:
    calls = [n for n in ix.scope_nodes(scope) if isinstance(n, ast.Call)]
    selects = next((c for c in calls if _selects(ix, c)), None)
    if selects is None:
        return
    src = sources_for(ix)
    for call in calls:
        f = call.func
        last = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if last == "fit" and isinstance(f, ast.Attribute):
            arg = kwarg(call, "val_dataloaders") or (call.args[2] if len(call.args) > 2 else None)
            what = "Lightning's validation loop"
        elif last.endswith("Trainer") and last[:1].isupper():
            arg, what = kwarg(call, "eval_dataset"), "the Trainer's evaluation"
        else:
            continue
        o = src.origin(arg) if arg is not None else None
        if o is None or o.kind != TEST:
            continue
        ev = _test_evidence(ix, call)
        if ev is None:
            continue
        yield Hit("selection-on-test-data", arg,
                  f"`{ix.segment(arg)}`, the test set by its name, is given to {what}, which chooses the model here "
                  f"(`{ix.segment(selects)}`, line {selects.lineno}), while this code also has validation data "
                  f"(`{ix.segment(ev)}`, line {ev.lineno}): the test set takes part in choosing the model, so the "
                  f"test score reported afterwards is optimistic",
                  fix=f"evaluate on the validation data (`{ix.segment(ev)}`) during training and on the test set "
                      f"once, at the end")


def _sites(ix: FileIndex) -> list[tuple[ast.AST, ast.expr, str]]:
    found = ix.cache.get("selection-sites")
    if found is None:
        found = ix.cache["selection-sites"] = [*_improvement_sites(ix), *_plateau_sites(ix), *_stopper_sites(ix)]
    return found


_RUNNING_MAX = "kept as the running best (the score reported for the run)"


def _running_best_sites(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.expr, str]]:
    """``best_acc = max(best_acc, test_acc)``: the best score over the epochs, the number the run reports."""
    for node in ix.kids:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name) and node.value.func.id in ("max", "min")
                and len(node.value.args) == 2):
            continue
        text = dotted(node.targets[0])
        if not _best_like(text):
            continue
        others = [a for a in node.value.args if dotted(a) != text]
        if len(others) == 1:
            yield node.value, others[0], _RUNNING_MAX


def _judge(ix: FileIndex, kind: str) -> Iterator[Hit]:
    src = sources_for(ix)
    seen: set[int] = set()
    extra = list(_running_best_sites(ix)) if kind == TEST else []
    for site, metric, what in [*_sites(ix), *extra]:
        if id(site) in seen:
            continue
        phase = _phase_loop(ix, site) if kind == TRAIN else None
        if phase is not None:  # the decision runs in every phase of `for phase in ["train", "val"]`
            seen.add(id(site))
            yield _phase_hit(ix, site, metric, what, *phase)
            continue
        o = src.origin(metric)
        if o is None or o.kind != kind or _validation_switch(ix, site) is not None:
            continue
        quantity = ix.segment(metric)
        if kind == TRAIN:
            ev = _val_evidence(ix, site, o)
            if ev is None:
                continue
            seen.add(id(site))
            effect = ("the learning rate is cut when the training loss stalls, not when the model stops "
                      "improving on unseen data" if "ReduceLROnPlateau" in what else
                      "the training quantity keeps improving while the model over-fits, so the 'best' model is "
                      "the most over-fitted one and early stopping comes late or never")
            hit = Hit("selection-on-train-data", site,
                      f"`{quantity}` is {what}, but it comes from the training data: {_proof(ix, o)}; this code "
                      f"also has held-out data (`{ix.segment(ev)}`, line {ev.lineno}) that the decision does not "
                      f"read: {effect}",
                      fix=f"decide on {_held_out(ix, ev)} instead of `{quantity}`")
            if "ReduceLROnPlateau" in what:  # a schedule that follows training progress can be a design
                hit.severity = "info"
                hit.message += " (a plateau schedule on the training loss can be a design: reported at info level)"
            yield hit
        else:
            ev = _test_evidence(ix, site)
            if ev is None:
                continue
            seen.add(id(site))
            yield Hit("selection-on-test-data", site,
                      f"`{quantity}` is {what}, but it comes from the test set: {_proof(ix, o)}, while this file "
                      f"also has validation data (`{ix.segment(ev)}`, line {ev.lineno}): the test set takes part "
                      f"in choosing the model, so the test score reported afterwards is optimistic",
                      fix=f"decide on the validation data (`{ix.segment(ev)}`) and evaluate the test set once, "
                          f"on the chosen model")


# -- Lightning: a monitor key logged by training_step ------------------------------------------
def _logged(ix: FileIndex) -> dict[str, set[str]]:
    """Keys logged with ``self.log("key", ...)``/``self.log_dict({"key": ...})`` -> the hooks logging them."""
    out: dict[str, set[str]] = {}
    for call in ix.calls:
        f = call.func
        if not (isinstance(f, ast.Attribute) and dotted(f.value) == "self" and f.attr in ("log", "log_dict")):
            continue
        func = ix.enclosing_function(call)
        hook = func.name if func is not None else ""
        keys: list[ast.AST] = []
        if f.attr == "log" and call.args:
            keys = [call.args[0]]
        elif f.attr == "log_dict" and call.args and isinstance(call.args[0], ast.Dict):
            keys = [k for k in call.args[0].keys if k is not None]
        for k in keys:
            if isinstance(k, ast.Constant) and isinstance(k.value, str):
                out.setdefault(k.value, set()).add(hook)
    return out


def _lightning(ix: FileIndex) -> Iterator[Hit]:
    logged = _logged(ix)
    val_keys = sorted(k for k, hooks in logged.items() if hooks & set(_VAL_HOOKS))
    if not val_keys:
        return
    for call in ix.calls:
        last = (ix.qualname(call.func) or "").rsplit(".", 1)[-1]
        monitor = kwarg(call, "monitor") if last in ("EarlyStopping", "ModelCheckpoint") else None
        yield from _monitor(ix, monitor, logged, val_keys, f"{last}'s monitor")
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Dict):
            keys = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
            if "scheduler" in keys and "monitor" in keys:
                for hit in _monitor(ix, keys["monitor"], logged, val_keys, "the plateau scheduler's monitor"):
                    hit.severity = "info"  # a schedule on training progress can be a design (see _judge)
                    yield hit


def _monitor(ix: FileIndex, monitor: ast.AST | None, logged: dict[str, set[str]], val_keys: list[str],
             what: str) -> Iterator[Hit]:
    if not (isinstance(monitor, ast.Constant) and isinstance(monitor.value, str)):
        return
    hooks = logged.get(monitor.value, set())
    if not hooks or not hooks <= set(_TRAIN_HOOKS) or role(monitor.value) == VAL:
        return
    yield Hit("selection-on-train-data", monitor,
              f"{what} is {monitor.value!r}, which only {sorted(hooks)[0]} logs: the model is chosen or stopped on "
              f"the training data while validation_step logs {val_keys[0]!r}: the training quantity keeps improving "
              f"while the model over-fits, so the 'best' model is the most over-fitted one",
              fix=f"monitor the validation key ({val_keys[0]!r}) instead of {monitor.value!r}")


# -- a decision inside `for phase in ["train", "val"]` that the training phase reaches too -----------------------
def _phase_loop(ix: FileIndex, site: ast.AST) -> tuple[ast.For, str] | None:
    """The ``for phase in ['train', 'val']:`` loop around a decision that no test of ``phase`` keeps out of the
    training phase (or that one lets in only there), with the training phase's name."""
    func = ix.enclosing_function(site)
    for loop in ix.enclosing_loops(site):
        if not (isinstance(loop, ast.For) and isinstance(loop.target, ast.Name)
                and isinstance(loop.iter, (ast.List, ast.Tuple))):
            continue
        names = [e.value for e in loop.iter.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)]
        if len(names) != len(loop.iter.elts):
            continue
        train = [n for n in names if role(n) == TRAIN]
        if len(train) != 1 or not any(role(n) == VAL for n in names):
            continue
        var = loop.target.id
        if ix.enclosing_function(loop) is not func or _phase_gated(ix, site, loop, var, train[0]):
            return None
        return loop, train[0]
    return None


def _phase_gated(ix: FileIndex, site: ast.AST, loop: ast.For, var: str, train: str) -> bool:
    """Does a test of the phase between the loop and the decision keep the training phase out?  (``if phase ==
    'val'``, ``if phase != 'train'``, an ``else`` of ``if phase == 'train'``, a ``continue`` on the training
    phase.)  A gate that lets only the training phase in is no gate."""
    child = site
    for anc in ix.ancestors(site):
        if anc is loop:
            break
        if isinstance(anc, (ast.If, ast.While)) and any(isinstance(n, ast.Name) and n.id == var
                                                        for n in ast.walk(anc.test)):
            only_train = _admits_only(anc.test, var, train)
            in_body = child in anc.body
            if not (only_train is True and in_body):
                return True
        child = anc
    for node in ast.walk(loop):  # `if phase == 'train': ...; continue` before the decision
        if isinstance(node, ast.If) and any(isinstance(n, ast.Name) and n.id == var for n in ast.walk(node.test)) \
                and any(isinstance(n, (ast.Continue, ast.Break)) for s in node.body for n in ast.walk(s)):
            return True
    return False


def _admits_only(test: ast.AST, var: str, train: str) -> bool | None:
    """True for ``phase == 'train'`` (or ``'train' == phase``), None for any other test."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq):
        sides = [test.left, test.comparators[0]]
        if any(isinstance(x, ast.Name) and x.id == var for x in sides) and any(
                isinstance(x, ast.Constant) and x.value == train for x in sides):
            return True
    return None


def _phase_hit(ix: FileIndex, site: ast.AST, metric: ast.expr, what: str, loop: ast.For, train: str) -> Hit:
    var = loop.target.id
    quantity = ix.segment(metric)
    return Hit("selection-on-train-data", site,
               f"`{quantity}` is {what}, inside `for {var} in {ix.segment(loop.iter)}` (line {loop.lineno}) with no "
               f"test of `{var}` that keeps the {train!r} phase out: the decision is also made on the training "
               f"pass's numbers, so the 'best' model is whichever phase scored best, and the training one keeps "
               f"improving as the model over-fits",
               fix=f"make the decision only in the validation phase (`if {var} != {train!r} and ...`)")


# -- skorch: callbacks that monitor the training loss of a net that holds out a validation split -----------------
def _skorch(ix: FileIndex) -> Iterator[Hit]:
    nets = [c for c in ix.calls if (ix.qualname(c.func) or "").startswith("skorch.")
            and (ix.qualname(c.func) or "").rsplit(".", 1)[-1].startswith("NeuralNet")]
    if not nets or any(kwarg(c, "train_split") is not None or any(kw.arg is None for kw in c.keywords)
                       for c in nets):
        return  # no net here, or one whose validation split is set explicitly (None: no validation)
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        if not q.startswith("skorch.") or last not in ("EarlyStopping", "Checkpoint", "LRScheduler"):
            continue
        monitor = kwarg(call, "monitor")
        if not (isinstance(monitor, ast.Constant) and isinstance(monitor.value, str)
                and monitor.value.startswith("train_")):
            continue
        hit = Hit("selection-on-train-data", monitor,
                  f"skorch's {last} monitors {monitor.value!r}, but the net (line {nets[0].lineno}) holds out a "
                  f"validation split (skorch's default train_split) and logs 'valid_loss': the model is chosen or "
                  f"stopped on the training data, which keeps improving while the model over-fits",
                  fix=f"monitor the validation key ({monitor.value.replace('train_', 'valid_', 1)!r})")
        if last == "LRScheduler":
            hit.severity = "info"
        yield hit
