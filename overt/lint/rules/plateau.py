"""A plateau scheduler whose mode contradicts the quantity it is stepped with
(OVT114 ``plateau-mode-mismatch``, issue 33).

``ReduceLROnPlateau`` defaults to ``mode='min'``: stepped with an accuracy (a quantity that
should rise), every improvement looks like a plateau and the learning rate is cut; ``mode='max'``
stepped with a loss is the mirror image.  The rule reads the direction from the name of what is
passed to ``step()`` (or to Lightning's ``"monitor"``): a name that says accuracy/score/F1/AUC
rises, one that says loss/error/perplexity falls.  Names that say neither (``metric``, ``val``)
are left alone.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, kwarg
from overt.lint.rules.base import Hit, rule

_RISES = re.compile(r"(^|[^a-z])(acc|accuracy|f1|auc|auroc|roc|score|precision|recall|iou|miou|map|bleu|dice|"
                    r"r2|top1|top5|correct|reward|return)s?($|[^a-z])")
_FALLS = re.compile(r"(^|[^a-z])(loss|losses|err|error|errors|mse|mae|rmse|nll|perplexity|ppl|wer|cer|cost|"
                    r"fid|kid|lpips|distance|dist|divergence|kl|kld|regret|latency|ter|mape|smape|energy|diff|gap)"
                    r"($|[^a-z])")  # a name with words of both kinds (fid_score) says nothing


def _name(node: ast.AST | None) -> str | None:
    """The words naming a metric expression: ``val_acc``, ``self.best_acc``, ``metrics['val/loss']``,
    ``acc.item()``, ``float(loss)``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Subscript):
        return _name(node.slice)
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr in ("item", "mean", "cpu", "detach", "tolist"):
            return _name(node.func.value)
        if isinstance(node.func, ast.Name) and node.func.id in ("float", "round") and node.args:
            return _name(node.args[0])
    return None


def direction(name: str) -> str | None:
    """'max' for a name that says the quantity rises, 'min' for one that says it falls, else None."""
    low = name.lower()
    rises, falls = bool(_RISES.search(low)), bool(_FALLS.search(low))
    if rises == falls:
        return None
    return "max" if rises else "min"


def _mode(call: ast.Call) -> str | None:
    node = kwarg(call, "mode") or (call.args[1] if len(call.args) > 1 else None)
    if node is None:
        return "min"
    if isinstance(node, ast.Constant) and node.value in ("min", "max"):
        return node.value
    return None  # a variable: the author decides


@rule("plateau-mode-mismatch")
def plateau_mode_mismatch(ix: FileIndex) -> Iterator[Hit]:
    schedulers: dict[str, tuple[ast.Call, str]] = {}  # the text of the target -> (constructor, mode)
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if not q.endswith("ReduceLROnPlateau") or not ix.is_torchish(q):
            continue
        mode = _mode(call)
        parent = ix.parents.get(call)
        if mode is None:
            continue
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            schedulers[_key(ix, parent.targets[0], call)] = (call, mode)
        elif isinstance(parent, ast.Dict):  # {"scheduler": ReduceLROnPlateau(...), "monitor": "val_acc"}
            schedulers[f"<dict {id(parent)}>"] = (call, mode)
    if not schedulers:
        return
    for call in ix.calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "step"):
            continue
        entry = schedulers.get(_key(ix, call.func.value, call)) or schedulers.get(_key(ix, call.func.value, None))
        metric = kwarg(call, "metrics") or (call.args[0] if call.args else None)
        if entry is None or metric is None:
            continue
        yield from _judge(entry, metric, call)
    for node in ast.walk(ix.tree):  # Lightning: {"scheduler": sched, "monitor": "val_acc"}
        if not isinstance(node, ast.Dict):
            continue
        keys = {k.value: v for k, v in zip(node.keys, node.values) if isinstance(k, ast.Constant)}
        sched, monitor = keys.get("scheduler"), keys.get("monitor")
        if sched is None or monitor is None:
            continue
        entry = schedulers.get(f"<dict {id(node)}>") if isinstance(sched, ast.Call) else \
            schedulers.get(_key(ix, sched, node)) or schedulers.get(_key(ix, sched, None))
        if entry is not None:
            yield from _judge(entry, monitor, monitor)


def _key(ix: FileIndex, target: ast.AST, at: ast.AST | None) -> str:
    """A scheduler's name in its scope: ``self.x`` in its class, a plain name in its function
    (``at`` None: the module's)."""
    text = ast.unparse(target)
    if at is None:
        return text
    if text.startswith("self."):
        func = ix.enclosing_function(at)
        cls = ix.enclosing_class(func) if func is not None else None
        return f"{id(cls)}:{text}"
    func = ix.enclosing_function(at)
    return f"{id(func)}:{text}" if func is not None else text


def _judge(entry: tuple[ast.Call, str], metric: ast.AST, at: ast.AST) -> Iterator[Hit]:
    ctor, mode = entry
    name = _name(metric)
    if name is None:
        return
    wants = direction(name)
    if wants is None or wants == mode:
        return
    what = "should rise (an accuracy or score)" if wants == "max" else "should fall (a loss or error)"
    default = " (the default)" if kwarg(ctor, "mode") is None and len(ctor.args) < 2 else ""
    yield Hit("plateau-mode-mismatch", at,
              f"ReduceLROnPlateau (line {ctor.lineno}) is in mode '{mode}'{default} but is stepped with "
              f"{name!r}, which {what}: every improvement counts as a plateau, so the learning rate is cut "
              f"while the model improves (and kept while it gets worse)",
              fix=f"ReduceLROnPlateau(optimizer, mode='{wants}', ...)")
