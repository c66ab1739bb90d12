"""A model's prediction computed, bound to a name and never read (OVT350 ``prediction-never-read``, issue 33).

An invariant of training and evaluation code: a forward a program runs and keeps under a name is read --
a prediction is computed to be used.  One that nothing reads means the line that should use it reads
something else: a student distilled on the data's labels while the teacher's labels, computed just above,
are left unused (aidotse/LeakPro#440, w192); a distillation loss given the teacher's logits on both sides
while the student's ``output = model(xb)`` is never read (w57); early stopping that watches the training loss
while ``valid_loss`` is computed and dropped (w125).  The symptom (a metric a few points off) shows far from
the line; the unused name points at it.

Proven from the code: an assignment ``name = <expr>`` to one plain name (not ``_``-prefixed) whose value is a
call of a model of the file (a name the index knows as a module, or named like one: ``model``, ``teacher``,
``net``; not ``self``) -- alone, through a method chain (``teacher(x).argmax(1)``, ``.detach()``,
``.softmax(1)``) or as an argument of a loss or ``torch``/``F`` function (``F.cross_entropy(model(xv), yv)``)
-- and ``name`` is never read anywhere in the file (no load in any scope, no ``global``/``nonlocal``
declaration, no ``del``).  Silent in test files, in files that read names dynamically (``locals()``,
``vars()``, ``eval``, ``exec``), where the forward is run for its side effects (the file registers forward
hooks, or the scope times or profiles: ``perf_counter``, ``time.time``, ``timeit``, ``profile``,
``synchronize``), in ``__init__`` and builder functions (a forward on a dummy input to size a layer), and for
names that say they are throwaway (``dummy``, ``warmup``, ``unused``, ``tmp``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_CHAIN = {"argmax", "argmin", "max", "min", "detach", "softmax", "log_softmax", "sigmoid", "float", "cpu", "numpy",
          "squeeze", "unsqueeze", "view", "reshape", "flatten", "mean", "sum", "item", "tolist", "clone", "to",
          "exp", "round", "long", "int", "logits", "last_hidden_state"}
_DYNAMIC = {"locals", "vars", "eval", "exec", "globals"}
_TIMING = {"perf_counter", "time", "timeit", "profile", "synchronize", "record_function", "Timer", "benchmark"}
_THROWAWAY = {"dummy", "warmup", "warm", "unused", "tmp", "temp", "ignored", "discard", "trace", "traced"}
_SIDE = {"register_forward_hook", "register_forward_pre_hook", "register_full_backward_hook", "register_hook"}


def _model_call(ix: FileIndex, node: ast.AST) -> ast.Call | None:
    """The call of a model ``node`` is (or ends in through a method chain, an attribute or a subscript)."""
    while True:
        if isinstance(node, ast.Call):
            name = dotted(node.func)
            if name is not None and name.split(".")[0] not in ("self", "super", "torch", "F", "np", "nn") \
                    and "." not in name and ix.is_model(name):
                return node
            if isinstance(node.func, ast.Attribute) and node.func.attr in _CHAIN:
                node = node.func.value
                continue
            return None
        if isinstance(node, ast.Attribute) and node.attr in _CHAIN:
            node = node.value
            continue
        if isinstance(node, ast.Subscript):
            node = node.value
            continue
        return None


def _prediction(ix: FileIndex, value: ast.AST) -> ast.Call | None:
    """The model call ``value`` computes a prediction from: the value itself, or an argument of a loss or
    ``torch``/``F`` function called on it."""
    call = _model_call(ix, value)
    if call is not None:
        return call
    if isinstance(value, ast.Call):
        fname = dotted(value.func) or ""
        if ix.is_loss_fn(value) or fname.split(".")[0] in ("F", "torch") or fname in ix.losses:
            for arg in value.args[:2]:
                call = _model_call(ix, arg)
                if call is not None:
                    return call
    return None


def _scope_of(ix: FileIndex, node: ast.AST) -> ast.AST:
    fn = ix.enclosing_function(node)
    return fn if fn is not None else ix.tree


@rule("prediction-never-read")
def prediction_never_read(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file or ix.path is None:
        return  # a notebook's cells (linted as one source, no path) compute values to look at, not only to use
    if not any(isinstance(c.func, ast.Attribute) and c.func.attr == "backward" for c in ix.calls):
        return  # a program that trains (a backward() of its own): what it computes is computed to be used
    read: set[str] = set()
    declared: set[str] = set()
    dynamic = False
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            read.add(node.id)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            declared.update(node.names)
        elif isinstance(node, ast.Call) and (isinstance(node.func, ast.Name) and node.func.id in _DYNAMIC or
                                             isinstance(node.func, ast.Attribute) and node.func.attr in _SIDE):
            dynamic = True  # names read by their text (locals(), eval), forwards run for their hooks
    if dynamic:
        return
    for node in ast.walk(ix.tree):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        name = node.targets[0].id
        if name.startswith("_") or name in read or name in declared or \
                any(t in _THROWAWAY for t in tokens(name)):
            continue
        call = _prediction(ix, node.value)
        if call is None:
            continue
        scope = _scope_of(ix, node)
        if not (ix.under_no_grad(node) or any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and
                                              n.func.attr == "backward" for n in ix.scope_nodes(scope))):
            continue  # neither an evaluation's prediction (no_grad) nor one beside the training step's backward
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)) and \
                (scope.name == "__init__" or tokens(scope.name)[:1] in (["build"], ["init"], ["make"], ["setup"])):
            continue
        if any(isinstance(n, (ast.Name, ast.Attribute)) and
               (n.id if isinstance(n, ast.Name) else n.attr) in _TIMING for n in ast.walk(scope)):
            continue
        model = dotted(call.func)
        yield Hit("prediction-never-read", node,
                  f"`{name} = {ix.segment(node.value)}` computes {model}'s prediction and nothing in the file ever "
                  f"reads `{name}`: a prediction is computed to be used, so the line that should use it reads "
                  "something else (a student distilled on the data's labels instead of the teacher's, a loss given "
                  "the teacher's logits where the student's output was meant, early stopping on the training loss "
                  "while the validation loss is dropped), and the model trains or is judged on another quantity "
                  "than the one the code computed for it",
                  fix=f"use `{name}` where it was meant (the loss's target or input, the monitored value), or "
                      "delete the line if the forward is not needed")
