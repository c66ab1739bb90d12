"""Which parameter each positional argument of a call lands in, where the callee's signature is known.

:func:`signature_of` answers for a call only when its callee is certain:

- a library callable the file's imports resolve (``torch.optim.SGD``, ``F.binary_cross_entropy``,
  ``nn.Conv2d``, ``sklearn.metrics.roc_auc_score``, ``torchmetrics.functional.precision``), read from
  the table ``signatures_data`` (introspected from the installed libraries by
  ``scripts/lint_signatures.py``: lint never imports torch);
- a call of an object bound, everywhere in the file, to one such class: a torch loss (its
  ``forward``) or a torchmetrics metric (its ``update``): ``criterion = nn.BCELoss()``
  ... ``criterion(target, output)``;
- a module-level function or a class (its ``__init__``) of another module of the project, imported
  (``from utils import train``, ``from models import Net``);
- a function or class defined in the file: a module-level ``f(...)``, a class ``C(...)`` (its
  ``__init__``), ``self.m(...)`` in a method of a class that defines ``m`` (and no subclass in the
  file redefines it with other parameters), ``super().__init__(...)`` / ``super().m(...)`` of a
  single base known here or in the table, and ``Base.__init__(self, ...)``.

Decorators other than a few that keep the signature (``staticmethod``, ``classmethod``,
``torch.no_grad()``, ``functools.lru_cache``, ...) make the callee unknown; so does a name bound
twice with different parameter lists.

Also here: the closed sets of names that say "predictions" and "labels", used both to read an
argument's role and a parameter's.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overt.lint.analysis.values import resolve_in
from overt.lint.index import FileIndex, dotted

#: parameter names of a (prediction, target) pair, by role
PRED_SLOTS = frozenset({"input", "preds", "y_pred", "y_score", "y_prob", "y_proba", "probas_pred"})
TARGET_SLOTS = frozenset({"target", "y_true"})
#: argument names that say, with no other reading, predictions or labels
PRED_NAMES = frozenset({"pred", "preds", "prediction", "predictions", "y_pred", "y_preds", "y_hat", "yhat",
                        "output", "outputs", "logits", "scores", "y_score", "y_scores", "y_prob", "y_probs",
                        "probs", "probas", "y_pred_proba"})
TARGET_NAMES = frozenset({"target", "targets", "label", "labels", "y_true", "gt", "ground_truth", "true_labels",
                          "gt_labels", "y_test", "y", "ys", "yb", "y_batch", "batch_y", "y_val", "y_valid",
                          "y_train", "y_eval", "y_dev"})

#: callables whose prediction and target may trade places without changing the result
SYMMETRIC = frozenset({
    "torch.nn.functional.mse_loss", "torch.nn.functional.l1_loss", "torch.nn.functional.smooth_l1_loss",
    "torch.nn.functional.huber_loss", "torch.nn.MSELoss.forward", "torch.nn.L1Loss.forward",
    "torch.nn.SmoothL1Loss.forward", "torch.nn.HuberLoss.forward",
    # a KL divergence written with the model in the target is a reverse KL, often on purpose
    "torch.nn.functional.kl_div", "torch.nn.KLDivLoss.forward",
    "sklearn.metrics.accuracy_score", "sklearn.metrics.matthews_corrcoef", "sklearn.metrics.cohen_kappa_score",
    "sklearn.metrics.mean_squared_error", "sklearn.metrics.mean_absolute_error", "sklearn.metrics.jaccard_score",
    "sklearn.metrics.hamming_loss", "sklearn.metrics.zero_one_loss", "sklearn.metrics.root_mean_squared_error",
    "torchmetrics.functional.mean_squared_error", "torchmetrics.functional.mean_absolute_error",
})
#: scikit-learn metrics whose (y_true, y_pred) order matters: ``metric-arguments-swapped`` (OVT806) owns
#: a swap of their predictions and labels
SKLEARN_ASYMMETRIC = frozenset({"precision_score", "recall_score", "f1_score", "fbeta_score",
                                "precision_recall_fscore_support", "confusion_matrix",
                                "multilabel_confusion_matrix", "classification_report", "balanced_accuracy_score"})

#: decorators that leave a function's parameters as written
_KEEP_DECORATORS = frozenset({"staticmethod", "classmethod", "no_grad", "inference_mode", "enable_grad",
                              "lru_cache", "cache", "abstractmethod", "override", "script", "ignore", "unused",
                              "compile", "jit", "njit", "autocast", "custom_fwd", "custom_bwd"})
_ALIAS_HEADS = {"nn": "torch.nn", "F": "torch.nn.functional", "functional": "torch.nn.functional",
                "optim": "torch.optim"}
_UNWRAP = frozenset({"to", "cuda", "cpu", "float", "double", "half", "train", "eval"})


@dataclass(frozen=True)
class Signature:
    """What a call binds: ``positional`` the parameters its positional arguments fill, in order
    (``self`` dropped and the call's own bound first argument skipped), ``keyword_only`` the rest,
    ``star`` whether extra positional arguments go to ``*args``.  ``name`` is the callee as a user
    reads it, ``key`` the table's key for library callables (None for the file's own)."""

    name: str
    positional: tuple[str, ...]
    keyword_only: tuple[str, ...]
    star: bool
    key: str | None = None

    @property
    def params(self) -> frozenset[str]:
        return frozenset(self.positional) | frozenset(self.keyword_only)


def _table() -> dict[str, tuple[tuple[str, ...], tuple[str, ...], bool]]:
    from overt.lint.analysis.signatures_data import SIGNATURES
    return SIGNATURES


def _library_name(ix: FileIndex, func: ast.AST) -> str | None:
    q = ix.qualname(func)
    if q is None:
        return None
    head, _, rest = q.partition(".")
    if head in _ALIAS_HEADS and head not in ix.aliases and rest:
        q = f"{_ALIAS_HEADS[head]}.{rest}"
    if q.startswith("torchmetrics.") and not q.startswith("torchmetrics.functional."):
        q = "torchmetrics." + q.rsplit(".", 1)[-1]  # torchmetrics.classification.X is exported as torchmetrics.X
    elif q.startswith("torchmetrics.functional."):
        q = "torchmetrics.functional." + q.rsplit(".", 1)[-1]
    return q


def _from_table(key: str, shown: str, skip: int = 0) -> Signature | None:
    entry = _table().get(key)
    if entry is None:
        return None
    pos, kwonly, star = entry
    if skip > len(pos):
        return None
    return Signature(shown, tuple(pos[skip:]), tuple(kwonly), star, key)


def _bound_class(ix: FileIndex, name: str) -> str | None:
    """The library class every assignment in the file binds ``name`` to, when there is one."""
    values = ix.assigns.get(name)
    if not values:
        return None
    found: set[str] = set()
    for value in values:
        while (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
               and value.func.attr in _UNWRAP):
            value = value.func.value
        if not isinstance(value, ast.Call):
            return None
        q = _library_name(ix, value.func)
        if q is None:
            return None
        found.add(q)
    return found.pop() if len(found) == 1 else None


def _decorators_keep(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    for d in func.decorator_list:
        target = d.func if isinstance(d, ast.Call) else d
        name = (dotted(target) or "").rsplit(".", 1)[-1]
        if name not in _KEEP_DECORATORS:
            return False
    return True


def _is_static(func: ast.FunctionDef | ast.AsyncFunctionDef) -> bool:
    return any((dotted(d) or "") == "staticmethod" for d in func.decorator_list)


def _own(func: ast.FunctionDef | ast.AsyncFunctionDef, shown: str, drop_self: bool) -> Signature | None:
    if not _decorators_keep(func):
        return None
    a = func.args
    pos = [p.arg for p in a.posonlyargs + a.args]
    if drop_self:
        if not pos:
            return None
        pos = pos[1:]
    return Signature(shown, tuple(pos), tuple(p.arg for p in a.kwonlyargs), a.vararg is not None)


def _methods(cls: ast.ClassDef, name: str) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    return [s for s in cls.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef)) and s.name == name]


def _is_plain_class(cls: ast.ClassDef) -> bool:
    """No decorator (a dataclass writes its own ``__init__``) and no metaclass."""
    return not cls.decorator_list and not cls.keywords


def _base_names(ix: FileIndex, cls: ast.ClassDef) -> list[str]:
    return [dotted(b) or "?" for b in cls.bases]


def _method_sig(ix: FileIndex, cls: ast.ClassDef, name: str, shown: str, depth: int = 0) -> Signature | None:
    """``cls.name``'s parameters (``self`` dropped), looked up along single inheritance in the file or,
    for a constructor, in the table."""
    if depth > 8 or not _is_plain_class(cls):
        return None
    defs = _methods(cls, name)
    if len(defs) == 1:
        func = defs[0]
        if _is_static(func):
            return _own(func, shown, drop_self=False)
        return _own(func, shown, drop_self=True)
    if defs:
        return None
    bases = cls.bases
    if not bases:
        return None
    if len(bases) != 1:
        return None
    return _base_method_sig(ix, bases[0], name, shown, depth + 1)


def _base_method_sig(ix: FileIndex, base: ast.expr, name: str, shown: str, depth: int = 0) -> Signature | None:
    base_name = dotted(base)
    if base_name is None:
        return None
    if base_name in ix.classes and base_name not in ix.aliases:
        return _method_sig(ix, ix.classes[base_name], name, shown, depth)
    if name != "__init__":
        return None
    q = _library_name(ix, base)
    return _from_table(q, shown) if q else None


def _overridden_elsewhere(ix: FileIndex, cls: ast.ClassDef, name: str, sig: Signature) -> bool:
    """A class of this file below ``cls`` that redefines ``name`` with other parameters: ``self.name(...)``
    may reach either."""
    below = {cls.name}
    changed = True
    while changed:
        changed = False
        for other in ix.classes.values():
            if other.name not in below and any(dotted(b) in below for b in other.bases):
                below.add(other.name)
                changed = True
                for func in _methods(other, name):
                    theirs = _own(func, sig.name, drop_self=not _is_static(func))
                    if theirs is None or theirs.positional != sig.positional:
                        return True
    return False


def _module_function(ix: FileIndex, name: str) -> Signature | None:
    if name in ix.aliases or name in ix.assigns:
        return None  # imported or rebound: not (only) the function defined here
    defs = [f for f in ix.functions.get(name, []) if isinstance(ix.parents.get(f), ast.Module)]
    if len(defs) != len(ix.functions.get(name, [])) or not defs:
        return None  # also a method or a nested function somewhere: which one `name` means is not plain
    sigs = {_own(f, name, drop_self=False) for f in defs}
    return sigs.pop() if len(sigs) == 1 else None


def signature_of(ix: FileIndex, call: ast.Call) -> Signature | None:
    """The parameters ``call``'s positional arguments fill, when its callee is known for sure."""
    func = call.func
    # super().__init__(...) / super().m(...)
    if (isinstance(func, ast.Attribute) and isinstance(func.value, ast.Call)
            and isinstance(func.value.func, ast.Name) and func.value.func.id == "super"):
        cls = ix.enclosing_class(call)
        if cls is None or len(cls.bases) != 1 or not _is_plain_class(cls):
            return None
        return _base_method_sig(ix, cls.bases[0], func.attr, f"{dotted(cls.bases[0])}.{func.attr}")
    # self.m(...) in a method
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) and func.value.id == "self":
        cls = ix.enclosing_class(call)
        if cls is None or ix.enclosing_function(call) is None:
            return None
        if f"self.{func.attr}" in ix.assigns:
            bound = _bound_class(ix, f"self.{func.attr}")
            return _instance_call(bound, f"self.{func.attr}") if bound else None
        sig = _method_sig(ix, cls, func.attr, f"{cls.name}.{func.attr}")
        if sig is None or _overridden_elsewhere(ix, cls, func.attr, sig):
            return None
        return sig
    name = dotted(func)
    if name is None:
        return None
    # Base.__init__(self, ...) / Base.m(self, ...) of a class defined here
    if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name):
        owner = func.value.id
        if owner in ix.classes and owner not in ix.aliases and call.args and dotted(call.args[0]) == "self":
            sig = _method_sig(ix, ix.classes[owner], func.attr, name)
            if sig is None or (sig.positional and _is_static_in(ix.classes[owner], func.attr)):
                return None
            # the explicit `self` fills no parameter of the signature (self was dropped): shift by one
            return Signature(sig.name, ("<self>",) + sig.positional, sig.keyword_only, sig.star)
    if (isinstance(func, ast.Attribute) and func.attr == "__init__" and call.args
            and dotted(call.args[0]) == "self"):
        q = _library_name(ix, func.value)
        sig = _from_table(q, f"{q}.__init__") if q else None
        if sig is not None:
            return Signature(sig.name, ("<self>",) + sig.positional, sig.keyword_only, sig.star, sig.key)
    if isinstance(func, ast.Name):
        if func.id in ix.classes and func.id not in ix.aliases and func.id not in ix.assigns:
            return _method_sig(ix, ix.classes[func.id], "__init__", func.id)
        if func.id in ix.functions:
            return _module_function(ix, func.id)
    if name.split(".")[0] in ix.imports and ix.project is not None:
        found = resolve_in(ix, name)  # a function of another module of the project (from utils import train)
        if isinstance(found, tuple):
            there, fn = found
            sig = _module_function(there, fn.name)
            return Signature(name, sig.positional, sig.keyword_only, sig.star) if sig is not None else None
        module, level, symbol = ix.imports[name] if name in ix.imports else (None, 0, None)
        there = ix.project.module(ix, module, level) if symbol else None
        if there is not None and symbol in there.classes and symbol not in there.aliases:
            return _method_sig(there, there.classes[symbol], "__init__", name)  # from models import Net; Net(...)
    q = _library_name(ix, func)
    if q and q in _table():
        return _from_table(q, q.replace("torch.nn.functional.", "F.").replace("torch.nn.", "nn."))
    if isinstance(func, ast.Attribute):
        own = _own_class_of(ix, dotted(func.value))
        if own is not None:  # trainer = Trainer(...) ... trainer.fit(loader, criterion)
            sig = _method_sig(ix, own, func.attr, f"{own.name}.{func.attr}")
            return None if sig is None or _overridden_elsewhere(ix, own, func.attr, sig) else sig
    bound = _bound_class(ix, name)
    return _instance_call(bound, name) if bound else None


def _own_class_of(ix: FileIndex, name: str | None) -> ast.ClassDef | None:
    """The class of this file every assignment of ``name`` makes an instance of (``t = Trainer(...)``)."""
    values = ix.assigns.get(name or "")
    if not values:
        return None
    found = set()
    for value in values:
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ix.classes
                and value.func.id not in ix.aliases):
            return None
        found.add(value.func.id)
    return ix.classes[found.pop()] if len(found) == 1 else None


def _is_static_in(cls: ast.ClassDef, name: str) -> bool:
    return any(_is_static(f) for f in _methods(cls, name))


def _instance_call(cls_key: str, shown: str) -> Signature | None:
    for method in ("forward", "update"):
        sig = _from_table(f"{cls_key}.{method}", f"{shown} ({cls_key.rsplit('.', 1)[-1]})")
        if sig is not None:
            return sig
    return None
