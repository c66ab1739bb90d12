"""Which training framework a piece of code runs under, and what that framework does for it.

Lightning runs a LightningModule's hooks itself: ``validation_step``/``test_step``/``predict_step``
run in eval mode under ``no_grad``, ``training_step`` and the ``on_train_*`` hooks (and a
Callback's) in training mode with autograd on, and the loss ``training_step`` returns is what it
backpropagates.  The Hugging Face ``Trainer`` calls a subclass's ``compute_loss``; Accelerate and
Fabric loops must call ``accelerator.backward(loss)`` / ``fabric.backward(loss)``.  Rules ask this
module where a node sits so that they stay quiet where the framework already does the right thing,
and speak the framework's language in their fix text where it does not.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted

LIGHTNING_TOPS = frozenset({"lightning", "pytorch_lightning", "lightning_fabric", "pl", "L"})

#: LightningModule / Callback hooks Lightning runs while training: the module is in training mode
#: and autograd is on (validation/test/predict hooks run in eval mode under no_grad).
TRAIN_HOOKS = frozenset({
    "training_step", "on_train_start", "on_train_end", "on_train_epoch_start", "on_train_epoch_end",
    "on_train_batch_start", "on_train_batch_end", "training_epoch_end", "on_fit_start",
    "on_before_backward", "on_after_backward", "on_before_optimizer_step", "on_before_zero_grad",
    "optimizer_step", "training_step_end",
})

_HF_TRAINERS = frozenset({"Trainer", "Seq2SeqTrainer"})


def _base_kind(ix: FileIndex, base: ast.expr, seen: frozenset[str]) -> str | None:
    q = ix.qualname(base) or ""
    head, last = q.split(".")[0], q.rsplit(".", 1)[-1]
    if last == "LightningModule":
        return "lightning-module"
    if last == "Callback" and (head in LIGHTNING_TOPS or "lightning" in q):
        return "lightning-callback"
    if (last in _HF_TRAINERS and head == "transformers") or (head == "trl" and last.endswith("Trainer")):
        return "hf-trainer"
    name = dotted(base)
    if name in ix.classes and name not in seen:
        return class_kind(ix, ix.classes[name], seen | {name})
    return None


def class_kind(ix: FileIndex, cls: ast.ClassDef, _seen: frozenset[str] = frozenset()) -> str | None:
    """``"lightning-module"``, ``"lightning-callback"``, ``"hf-trainer"`` or None: what ``cls`` derives from
    (through classes of this file)."""
    key = ("fw-class", id(cls))
    if key in ix.cache:
        return ix.cache[key]
    kind = None
    for base in cls.bases:
        kind = _base_kind(ix, base, _seen | {cls.name})
        if kind:
            break
    ix.cache[key] = kind
    return kind


def method_of(ix: FileIndex, node: ast.AST) -> tuple[ast.FunctionDef | ast.AsyncFunctionDef | None, str | None]:
    """(the method ``node`` is in, the framework kind of its class) -- (None, None) outside a class method."""
    func = ix.enclosing_function(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) else node
    while func is not None:
        parent = ix.parents.get(func)
        if isinstance(parent, ast.ClassDef):
            return func, class_kind(ix, parent)
        func = ix.enclosing_function(func)
    return None, None


def class_and_bases(ix: FileIndex, cls: ast.ClassDef) -> Iterator[ast.ClassDef]:
    """``cls`` and, transitively, its base classes defined in the same file (each once)."""
    todo, seen = [cls], set()
    while todo:
        cur = todo.pop()
        if cur.name in seen:
            continue
        seen.add(cur.name)
        yield cur
        todo += [ix.classes[dotted(b)] for b in cur.bases if dotted(b) in ix.classes]


def manual_optimization(ix: FileIndex, cls: ast.ClassDef) -> bool:
    """Does ``cls`` (or a base class of this file) set ``self.automatic_optimization = False``?"""
    for cur in class_and_bases(ix, cls):
        for n in ast.walk(cur):
            if isinstance(n, ast.Assign) and any(dotted(t) in ("self.automatic_optimization", "automatic_optimization")
                                                 for t in n.targets):
                if isinstance(n.value, ast.Constant) and n.value.value is False:
                    return True
            if isinstance(n, ast.FunctionDef) and n.name == "automatic_optimization":
                return True  # a property (its value is decided at runtime: treat as manual, lint stays quiet)
    return False


def uses_accelerate(ix: FileIndex) -> bool:
    """Does the file build an Accelerate ``Accelerator``?"""
    key = "fw-accelerate"
    if key not in ix.cache:
        quals = (ix.qualname(c.func) or "" for c in ix.calls)
        ix.cache[key] = any(q == "Accelerator" or (q.startswith("accelerate.") and q.endswith(".Accelerator"))
                            for q in quals)
    return ix.cache[key]


def uses_fabric(ix: FileIndex) -> bool:
    """Does the file build a Lightning ``Fabric``?"""
    key = "fw-fabric"
    if key not in ix.cache:
        ix.cache[key] = any((ix.qualname(c.func) or "").rsplit(".", 1)[-1] == "Fabric" for c in ix.calls)
    return ix.cache[key]


def framework_of(ix: FileIndex, node: ast.AST) -> str | None:
    """``"lightning"``, ``"hf-trainer"``, ``"accelerate"``, ``"fabric"`` or None: the framework whose
    conventions apply where ``node`` is (its class, or the file's training loop)."""
    _, kind = method_of(ix, node)
    if kind in ("lightning-module", "lightning-callback"):
        return "lightning"
    if kind == "hf-trainer":
        return "hf-trainer"
    if uses_fabric(ix):
        return "fabric"
    if uses_accelerate(ix):
        return "accelerate"
    return None


def framework_fix(ix: FileIndex, node: ast.AST, default: str, *, lightning: str | None = None,
                  accelerate: str | None = None, fabric: str | None = None, hf: str | None = None) -> str:
    """The fix text in the language of the framework ``node`` runs under (``default`` for a plain loop, or
    when the framework has no text of its own)."""
    text = {"lightning": lightning, "accelerate": accelerate, "fabric": fabric,
            "hf-trainer": hf}.get(framework_of(ix, node) or "")
    return text or default
