"""A best model kept in the wrong direction (OVT816 ``best-kept-in-wrong-direction``, issue 33).

An improvement test that keeps a loss when it rises (``if val_loss > best_loss: best_loss = val_loss;
save``) or an accuracy when it falls keeps the worst model and stops when the run improves.  The same
mistake in a framework's callback: Lightning's ``ModelCheckpoint``/``EarlyStopping`` default to
``mode="min"``, so ``monitor="val_acc"`` without ``mode="max"`` keeps the least accurate checkpoint;
skorch's ``EarlyStopping`` defaults to ``lower_is_better=True``.  The direction a quantity should move
in is read from its name, as :mod:`overt.lint.rules.plateau` does for ``ReduceLROnPlateau`` (a name
that says neither, a negated or computed quantity: silent).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.plateau import direction
from overt.lint.rules.runningbest import _wants_above
from overt.lint.rules.selection import improvement_tests


def _plain_name(expr: ast.AST) -> str | None:
    """The name of a quantity written plainly: ``val_loss``, ``self.acc``, ``loss.item()``, ``float(acc)``,
    ``metrics["val_acc"]``; None for a negation or any arithmetic (``-val_loss`` rises as the loss falls)."""
    if isinstance(expr, ast.Call):
        if isinstance(expr.func, ast.Attribute) and expr.func.attr in ("item", "cpu", "detach") and not expr.args:
            return _plain_name(expr.func.value)
        if isinstance(expr.func, ast.Name) and expr.func.id == "float" and len(expr.args) == 1:
            return _plain_name(expr.args[0])
        return None
    if isinstance(expr, ast.Subscript) and isinstance(expr.slice, ast.Constant) and isinstance(expr.slice.value, str):
        return expr.slice.value
    text = dotted(expr)
    return text.rsplit(".", 1)[-1] if text else None


@rule("best-kept-in-wrong-direction")
def best_kept_in_wrongdirection(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for t in improvement_tests(ix):
        if id(t.cmp) in seen or not isinstance(t.node, ast.If):
            continue
        name = _plain_name(t.metric)
        wants = direction(name) if name else None
        best_wants = direction(t.best_text.rsplit(".", 1)[-1])
        if wants is None or (best_wants is not None and best_wants != wants) or _negated(ix, t.metric):
            continue
        above = _wants_above(t)
        if above is None or above == (wants == "max"):
            continue
        seen.add(id(t.cmp))
        kept = "highest" if above else "lowest"
        should = "should fall (a loss or error)" if wants == "min" else "should rise (an accuracy or score)"
        yield Hit("best-kept-in-wrong-direction", t.cmp,
                  f"`{ix.segment(t.cmp)}` (line {t.cmp.lineno}) keeps the {kept} `{name}` as the best, but `{name}` "
                  f"{should}: the model kept is the worst one seen, and a patience counter runs out while the "
                  f"model improves",
                  fix=f"turn the comparison around (`{_flipped(ix, t.cmp)}`)")
    yield from _callbacks(ix)


def _negated(ix: FileIndex, metric: ast.AST) -> bool:
    """Is a plain name defined (in its function) as a negation or other arithmetic (``score = -val_loss``)?"""
    text = dotted(metric) if isinstance(metric, (ast.Name, ast.Attribute)) else None
    if text is None:
        return False
    func = ix.enclosing_function(metric)
    for value in ix.assigns.get(text, []):
        if ix.enclosing_function(value) is func and isinstance(value, (ast.UnaryOp, ast.BinOp)):
            return True
    return False


def _flipped(ix: FileIndex, cmp: ast.Compare) -> str:
    swap = {ast.Lt: ">", ast.LtE: ">=", ast.Gt: "<", ast.GtE: "<="}
    return f"{ix.segment(cmp.left)} {swap[type(cmp.ops[0])]} {ix.segment(cmp.comparators[0])}"


def _pre_auto_removal(ix: FileIndex) -> bool:
    """Code written for pytorch_lightning before 1.3, whose callbacks' default ``mode="auto"`` followed the
    monitor's name: Trainer arguments of that era (``early_stopping_callback=``, a callback object given as
    ``checkpoint_callback=``)."""
    for call in ix.calls:
        if kwarg(call, "early_stopping_callback") is not None:
            return True
        old = kwarg(call, "checkpoint_callback")
        if old is not None and not isinstance(old, ast.Constant):
            return True
    return False


def _hf_best_metric(ix: FileIndex, call: ast.Call) -> Iterator[Hit]:
    """``TrainingArguments(metric_for_best_model=..., greater_is_better=...)``: left out, greater_is_better is
    True unless the metric's name ends with "loss" (so a WER or an error is kept at its highest)."""
    metric = kwarg(call, "metric_for_best_model")
    if not (isinstance(metric, ast.Constant) and isinstance(metric.value, str)):
        return
    name = metric.value[5:] if metric.value.startswith("eval_") else metric.value
    wants = direction(name)
    given = kwarg(call, "greater_is_better")
    if given is None:
        greater, how = not metric.value.endswith("loss"), " (the default for a name that does not end in 'loss')"
    elif isinstance(given, ast.Constant) and isinstance(given.value, bool):
        greater, how = given.value, ""
    else:
        return
    if wants is None or greater == (wants == "max"):
        return
    yield Hit("best-kept-in-wrong-direction", given if given is not None else metric,
              f"metric_for_best_model={metric.value!r} with greater_is_better={greater}{how}, but {name!r} should "
              f"{'rise' if wants == 'max' else 'fall'}: load_best_model_at_end keeps the worst checkpoint and early "
              f"stopping counts every improvement as a miss",
              fix=f"greater_is_better={wants == 'max'}")


def _callbacks(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        yield from _hf_best_metric(ix, call)
        q = ix.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        monitor = kwarg(call, "monitor")
        if not (isinstance(monitor, ast.Constant) and isinstance(monitor.value, str)):
            continue
        wants = direction(monitor.value)
        if wants is None:
            continue
        lightning = "lightning" in q or q.startswith(("pl.", "L."))
        if last in ("ModelCheckpoint", "EarlyStopping") and lightning:
            mode = kwarg(call, "mode")
            if mode is None and _pre_auto_removal(ix):
                continue  # pytorch_lightning < 1.3 defaulted to mode="auto", which read the direction from the name
            if mode is None:
                given, default = "min", " (the default)"
            elif isinstance(mode, ast.Constant) and mode.value in ("min", "max"):
                given, default = mode.value, ""
            else:
                continue
            if given != wants:
                yield Hit("best-kept-in-wrong-direction", monitor,
                          f"{last} monitors {monitor.value!r} in mode {given!r}{default}, but {monitor.value!r} "
                          f"should {'rise' if wants == 'max' else 'fall'}: the checkpoint kept is the worst one and "
                          f"early stopping fires while the model improves",
                          fix=f"{last}(monitor={monitor.value!r}, mode={wants!r})")
        elif last == "EarlyStopping" and q.startswith("skorch."):
            lower = kwarg(call, "lower_is_better")
            if lower is None or (isinstance(lower, ast.Constant) and lower.value is True):
                if wants == "max":
                    yield Hit("best-kept-in-wrong-direction", monitor,
                              f"skorch's EarlyStopping monitors {monitor.value!r} with lower_is_better=True"
                              f"{' (the default)' if lower is None else ''}, but {monitor.value!r} should rise: the "
                              f"run stops while the model improves",
                              fix="EarlyStopping(monitor=..., lower_is_better=False)")
