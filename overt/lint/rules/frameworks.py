"""Rules that know Lightning's, the Hugging Face Trainer's, Accelerate's and Fabric's conventions.

- ``training-step-no-loss``: a LightningModule's ``training_step`` that returns nothing under
  automatic optimisation (Lightning skips backward and the optimizer step for the batch).
- ``backward-bypasses-framework``: ``loss.backward()`` where the framework's backward is required
  (``self.manual_backward`` in manual optimisation, ``accelerator.backward``, ``fabric.backward``).
- scheduler cadence in ``configure_optimizers`` (a per-step schedule returned without
  ``"interval": "step"``, and the converse), reported under ``scheduler-cadence``.
- a ``Trainer.compute_loss`` override that ignores ``num_items_in_batch``, reported under
  ``accumulation-unscaled``.
- evaluation and mode switches in Lightning hooks that run in training mode (``train-mode-in-eval``,
  ``graph-in-eval``, ``eval-mode-in-train``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import events
from overt.lint.analysis.frameworks import (TRAIN_HOOKS, class_and_bases, class_kind, manual_optimization, method_of,
                                            uses_accelerate, uses_fabric)
from overt.lint.index import FileIndex, FuncNode, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule

# --------------------------------------------------------------------------- scheduler cadence in configure_optimizers

#: schedules built for per-step stepping whatever their arguments say
_PER_STEP_KINDS = frozenset({"OneCycleLR", "CyclicLR"})
#: transformers' schedule factories: their horizon is num_training_steps
_HF_SCHEDULES = frozenset({"get_linear_schedule_with_warmup", "get_cosine_schedule_with_warmup",
                           "get_constant_schedule_with_warmup", "get_polynomial_decay_schedule_with_warmup",
                           "get_cosine_with_hard_restarts_schedule_with_warmup", "get_inverse_sqrt_schedule",
                           "get_wsd_schedule", "get_cosine_with_min_lr_schedule_with_warmup"})
#: the argument that holds each scheduler's horizon (name, position)
_HORIZON = {"StepLR": ("step_size", 1), "MultiStepLR": ("milestones", 1), "CosineAnnealingLR": ("T_max", 1),
            "CosineAnnealingWarmRestarts": ("T_0", 1), "LambdaLR": ("lr_lambda", 1),
            "LinearLR": ("total_iters", 3), "PolynomialLR": ("total_iters", 1)}
_STEP_WORDS = frozenset({"steps", "iters", "iterations", "iteration", "batches", "stepping"})
_EPOCH_WORDS = frozenset({"epoch", "epochs"})


def _words(ix: FileIndex, expr: ast.AST, func: FuncNode, depth: int = 2) -> set[str]:
    """Word tokens of the names in ``expr``, following local names to their assignments in ``func``."""
    out: set[str] = set()
    for n in ast.walk(expr):
        if isinstance(n, (ast.Name, ast.Attribute)):
            name = n.id if isinstance(n, ast.Name) else n.attr
            out.update(tokens(name))
            if isinstance(n, ast.Name) and depth > 0:
                for sub in ast.walk(func):
                    if isinstance(sub, ast.Assign) and any(dotted(t) == n.id for t in sub.targets):
                        out |= _words(ix, sub.value, func, depth - 1)
        elif isinstance(n, ast.arg):
            out.update(tokens(n.arg))
        elif isinstance(n, ast.Call) and dotted(n.func) == "len" and n.args and set(
                tokens(dotted(n.args[0]) or "")) & {"loader", "dataloader", "dl"}:
            out.add("steps")  # len(train_loader): a count of batches
    return out


def _cadence_of(ix: FileIndex, call: ast.Call, func: FuncNode) -> tuple[str, str] | None:
    """(kind, "step" | "epoch"): what the scheduler built by ``call`` is meant to be stepped by, when its
    arguments say so; None when they do not."""
    q = ix.qualname(call.func) or ""
    kind = q.rsplit(".", 1)[-1]
    if kind in _PER_STEP_KINDS or kind in _HF_SCHEDULES or (kind == "get_scheduler" and q.startswith("transformers")):
        horizon = [kw.value for kw in call.keywords if kw.arg in ("total_steps", "num_training_steps")]
        if kind == "OneCycleLR":
            horizon += [kw.value for kw in call.keywords if kw.arg in ("epochs", "steps_per_epoch")]
        words = set().union(*(_words(ix, h, func) for h in horizon)) if horizon else set()
        if words and words <= _EPOCH_WORDS | {"max", "num", "n", "self", "trainer", "hparams", "args", "cfg",
                                               "config", "total", "training"}:
            return None  # a per-step schedule given an epoch count: stepped per epoch on purpose
        return kind, "step"
    if kind not in _HORIZON or not (q.startswith("torch.") or ix.is_torchish(q)):
        return None
    name, pos = _HORIZON[kind]
    expr = kwarg(call, name)
    if expr is None and len(call.args) > pos:
        expr = call.args[pos]
    if expr is None:
        return None
    if isinstance(expr, ast.Lambda) and expr.args.args:
        param = set(tokens(expr.args.args[0].arg))  # the name the author gave the counter decides
        if param & _EPOCH_WORDS:
            return kind, "epoch"
        if param & (_STEP_WORDS | {"step", "it", "iter"}):
            return kind, "step"
    words = _words(ix, expr, func)
    if words & _STEP_WORDS:
        return kind, "step"
    if words & _EPOCH_WORDS:
        return kind, "epoch"
    return None


def _dict_items(node: ast.AST) -> dict[str, ast.expr] | None:
    """``{"k": v}`` or ``dict(k=v)`` as {k: v}; None for anything else."""
    if isinstance(node, ast.Dict):
        if any(k is None for k in node.keys):
            return None  # **other: keys unknown
        return {k.value: v for k, v in zip(node.keys, node.values)
                if isinstance(k, ast.Constant) and isinstance(k.value, str)}
    if isinstance(node, ast.Call) and dotted(node.func) == "dict" and not node.args:
        if any(kw.arg is None for kw in node.keywords):
            return None
        return {kw.arg: kw.value for kw in node.keywords}
    return None


def _refers(node: ast.AST | None, call: ast.Call, name: str | None) -> bool:
    return node is call or (name is not None and dotted(node) == name)


def _interval(ix: FileIndex, func: FuncNode, call: ast.Call, name: str | None) -> str | None:
    """The interval Lightning steps this scheduler at: "step"/"epoch", or None when it is not handed to
    Lightning here or its interval is not a literal."""
    nodes = ix.scope_nodes(func)
    for n in nodes:
        items = _dict_items(n)
        if items is None or not _refers(items.get("scheduler"), call, name):
            continue
        value = items.get("interval")
        if value is None:
            return "epoch"
        return value.value if isinstance(value, ast.Constant) and value.value in ("step", "epoch") else None
    for n in nodes:  # returned bare: `[opt], [sched]`, `{"optimizer": o, "lr_scheduler": sched}`, `(opt, sched)`?
        if isinstance(n, ast.Return) and n.value is not None:
            for sub in ast.walk(n.value):
                if _refers(sub, call, name):
                    items = _dict_items(n.value)
                    if items is not None and not _refers(items.get("lr_scheduler"), call, name):
                        return None
                    return "epoch"
    return None


def configure_optimizers_cadence(ix: FileIndex) -> Iterator[Hit]:
    """scheduler-cadence hits in LightningModule.configure_optimizers."""
    for func in ix.functions.get("configure_optimizers", []):
        _, kind = method_of(ix, func)
        if kind != "lightning-module":
            continue
        for n in ix.scope_nodes(func):
            if not isinstance(n, ast.Call):
                continue
            meant = _cadence_of(ix, n, func)
            if meant is None:
                continue
            sched_kind, cadence = meant
            stmt = ix.statement_of(n)
            name = None
            if isinstance(stmt, ast.Assign) and stmt.value is n and len(stmt.targets) == 1:
                name = dotted(stmt.targets[0])
            interval = _interval(ix, func, n, name)
            if interval is None or interval == cadence:
                continue
            what = name or sched_kind
            if cadence == "step":
                yield Hit("scheduler-cadence", n,
                          f"{sched_kind} is a per-step schedule (its horizon is counted in steps) but configure_optimizers "
                          f"hands it to Lightning without \"interval\": \"step\", so Lightning steps it once per epoch and "
                          f"the learning rate follows the schedule as many times too slowly as there are batches per "
                          f"epoch", fix=f"return {{\"optimizer\": optimizer, \"lr_scheduler\": {{\"scheduler\": {what}, "
                          f"\"interval\": \"step\"}}}} from configure_optimizers")
            else:
                yield Hit("scheduler-cadence", n,
                          f"{sched_kind} is configured in epochs but its lr_scheduler dict says \"interval\": \"step\", so "
                          f"Lightning steps it after every batch and the schedule runs as many times too fast as there "
                          f"are batches per epoch", fix="use \"interval\": \"epoch\" (Lightning's default), or give the "
                          "horizon in steps (self.trainer.estimated_stepping_batches)")


# --------------------------------------------------------------------------- training-step-no-loss


def _own_nodes(ix: FileIndex, func: FuncNode) -> list[ast.AST]:
    return ix.stmts_nodes(func.body)


def _stub(func: FuncNode) -> bool:
    """``raise NotImplementedError`` / ``pass`` / ``...`` (after a docstring): an abstract hook."""
    body = [s for s in func.body if not (isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant))]
    return not body or all(isinstance(s, (ast.Pass, ast.Raise)) for s in body)


@rule("training-step-no-loss")
def training_step_no_loss(ix: FileIndex) -> Iterator[Hit]:
    """A LightningModule's training_step with no ``return <value>`` under automatic optimisation."""
    for func in ix.functions.get("training_step", []):
        parent = ix.parents.get(func)
        if not isinstance(parent, ast.ClassDef) or class_kind(ix, parent) != "lightning-module":
            continue
        if manual_optimization(ix, parent) or _stub(func):
            continue
        nodes = _own_nodes(ix, func)
        if any(isinstance(n, ast.Return) and n.value is not None and not (
                isinstance(n.value, ast.Constant) and n.value.value is None) for n in nodes):
            continue
        if any(isinstance(n, (ast.Yield, ast.YieldFrom)) for n in nodes):
            continue
        if any(e.kind in ("backward", "step") for e in events(ix, func.body, depth=1)):
            continue  # it drives the optimisation itself (manual optimisation set elsewhere)
        yield Hit("training-step-no-loss", func,
                  f"{parent.name}.training_step returns nothing, so under automatic optimisation Lightning skips "
                  f"backward() and the optimizer step for every batch (it only warns once, \"training_step returned "
                  f"None\") and the model never trains", fix="return the loss from training_step (`return loss`, or a "
                  "dict with a \"loss\" key)")


# --------------------------------------------------------------------------- backward-bypasses-framework


def _plain_backwards(ix: FileIndex, nodes: list[ast.AST]) -> list[ast.Call]:
    """``x.backward(...)`` calls on a tensor (not ``torch.autograd.backward``, not a framework's backward)."""
    out = []
    for n in nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "backward":
            recv = dotted(n.func.value) or ""
            last = recv.rsplit(".", 1)[-1].lower()
            if recv.endswith("autograd") or last in ("self", "engine", "model_engine") or "accelerator" in last \
                    or "fabric" in last:
                continue
            if "scale" in (dotted(n.func.value.func) if isinstance(n.func.value, ast.Call) else "") or "":
                continue  # scaler.scale(loss).backward(): its own GradScaler (reported elsewhere if wrong)
            out.append(n)
    return out


def _prepared_names(ix: FileIndex) -> dict[tuple[int, str], str]:
    """(id of the enclosing function or 0, name) assigned from ``accelerator.prepare(...)`` /
    ``fabric.setup(...)`` / ``fabric.setup_optimizers(...)`` -> the wrapper's text.  Per function: the same
    name is often a plain optimizer in a baseline function of the same file."""
    key = "fw-prepared"
    if key in ix.cache:
        return ix.cache[key]
    out: dict[tuple[int, str], str] = {}
    for n in ix.calls:
        if isinstance(n.func, ast.Attribute) and n.func.attr in ("prepare", "setup", "setup_optimizers"):
            owner = dotted(n.func.value) or ""
            low = owner.rsplit(".", 1)[-1].lower()
            stmt = ix.parents.get(n)
            if not ("accelerator" in low or "fabric" in low) or not isinstance(stmt, ast.Assign) or stmt.value is not n:
                continue
            func = ix.enclosing_function(n)
            for t in stmt.targets:
                for e in (t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]):
                    if dotted(e):
                        out[(id(func) if func else 0, dotted(e))] = owner
    ix.cache[key] = out
    return out


@rule("backward-bypasses-framework")
def backward_bypasses_framework(ix: FileIndex) -> Iterator[Hit]:
    # Lightning manual optimisation: self.manual_backward(loss)
    for cls in ix.classes.values():
        if class_kind(ix, cls) != "lightning-module" or not manual_optimization(ix, cls):
            continue
        for func in cls.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name == "backward":
                continue  # LightningModule.backward(loss) is the hook manual_backward ends in
            for call in _plain_backwards(ix, _own_nodes(ix, func)):
                text = ix.segment(call.func.value)
                yield Hit("backward-bypasses-framework", call,
                          f"`{text}.backward()` in manual optimisation bypasses Lightning's precision plugin and "
                          f"strategy: under 16-mixed precision the optimizer step then unscales gradients that were "
                          f"never scaled (updates thousands of times too small), and DeepSpeed/FSDP miss their "
                          f"backward hooks", fix=f"call self.manual_backward({text}) instead")
    prepared = _prepared_names(ix)
    if not prepared:
        return
    if not (uses_accelerate(ix) or uses_fabric(ix)) and not any(
            "accelerator" in w.lower() or "fabric" in w.lower() for w in prepared.values()):
        return
    scopes: list[list[ast.stmt]] = [ix.tree.body] + [f.body for fs in ix.functions.values() for f in fs]
    for body in scopes:
        evs = events(ix, body, depth=0)
        func = ix.enclosing_function(body[0]) if body and body is not ix.tree.body else None
        scope = id(func) if func is not None else 0
        stepped = [e for e in evs if e.kind == "step" and (scope, e.target) in prepared]
        if not stepped:
            continue
        owner = prepared[(scope, stepped[0].target)]
        framework = "Fabric" if "fabric" in owner.lower() else "Accelerate"
        for call in _plain_backwards(ix, ix.stmts_nodes(body)):
            if ix.enclosing_function(call) is not ix.enclosing_function(stepped[0].node):
                continue
            text = ix.segment(call.func.value)
            accelerate = framework == "Accelerate"
            why = ("applies the mixed-precision loss scale and divides the loss by gradient_accumulation_steps"
                   if accelerate else "applies the precision plugin's loss scale and the strategy's hooks")
            made_by = f"{owner}.{'prepare' if accelerate else 'setup'}()"
            tail = " and under gradient accumulation the update is that many times too large" if accelerate else ""
            yield Hit("backward-bypasses-framework", call,
                      f"`{text}.backward()` while {stepped[0].target} comes from {made_by}: {framework}'s backward "
                      f"{why}; plain backward skips it, so under fp16 the prepared optimizer unscales gradients that "
                      f"were never scaled (updates thousands of times too small){tail}",
                      fix=f"call {owner}.backward({text}) instead")


# --------------------------------------------------------------------------- evaluation in Lightning training hooks

#: training-time hooks after which no more training happens: a mode left there does no harm
_LAST_HOOKS = frozenset({"on_train_end", "on_fit_end"})
_EVAL_ITER_CALLS = frozenset({"val_dataloader", "test_dataloader", "predict_dataloader"})
_EVAL_ITER_ATTRS = frozenset({"val_dataloaders", "test_dataloaders", "predict_dataloaders"})


def _hook_model(func: FuncNode, kind: str) -> str | None:
    """The name the hook holds the LightningModule by: ``self`` in a module, the ``pl_module`` parameter of a
    Callback hook."""
    if kind == "lightning-module":
        return "self"
    params = [a.arg for a in func.args.args]
    return params[2] if len(params) > 2 else None


def _eval_iter(ix: FileIndex, expr: ast.AST) -> bool:
    for n in ast.walk(expr):
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _EVAL_ITER_CALLS:
            return True
        if isinstance(n, ast.Attribute) and n.attr in _EVAL_ITER_ATTRS:
            return True
        if isinstance(n, (ast.Name, ast.Attribute)) and ix.loader_role(dotted(n) or "") == "eval" and \
                set(tokens(dotted(n) or "")) & {"loader", "dataloader", "dataloaders", "dl", "loaders"}:
            return True
    return False


def _runs_module(ix: FileIndex, node: ast.AST, holder: str) -> ast.Call | None:
    """The first call of the LightningModule (``self(x)``, ``pl_module(x)``, ``self.model(x)``...) under ``node``."""
    for n in ix.scope_nodes(node):
        if not isinstance(n, ast.Call):
            continue
        text = dotted(n.func) or ""
        if text == holder:
            return n
        if text.startswith(holder + ".") and text.count(".") == 1 and ix.is_model(text):
            return n
    return None


def lightning_eval_loops(ix: FileIndex) -> list[tuple[FuncNode, ast.stmt, ast.Call, str]]:
    """(hook, loop, model call, holder) for each loop over a validation/test loader that runs the module
    inside a Lightning hook that runs in training mode with autograd on."""
    key = "fw-eval-loops"
    if key in ix.cache:
        return ix.cache[key]
    out = []
    for cls in ix.classes.values():
        kind = class_kind(ix, cls)
        if kind not in ("lightning-module", "lightning-callback"):
            continue
        for func in cls.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name not in TRAIN_HOOKS:
                continue
            holder = _hook_model(func, kind)
            if holder is None:
                continue
            for loop in ix.loops:
                if not isinstance(loop, (ast.For, ast.AsyncFor)) or ix.enclosing_function(loop) is not func \
                        or ix.enclosing_loops(loop) or not _eval_iter(ix, loop.iter):
                    continue
                if {e.kind for e in events(ix, loop, depth=2)} & {"backward", "step"}:
                    continue
                call = _runs_module(ix, loop, holder)
                if call is not None:
                    out.append((func, loop, call, holder))
    ix.cache[key] = out
    return out


def _switched_before(ix: FileIndex, func: FuncNode, node: ast.AST) -> bool:
    """Does the hook switch a model to eval mode (or hand the module to a helper that may) before ``node``?"""
    return any(e.kind == "eval" and e.site.lineno <= node.lineno for e in events(ix, func.body, depth=2))


def lightning_train_mode_in_eval(ix: FileIndex) -> Iterator[Hit]:
    for func, loop, call, holder in lightning_eval_loops(ix):
        if _switched_before(ix, func, loop):
            continue
        yield Hit("train-mode-in-eval", call,
                  f"this loop evaluates {holder} inside {func.name}(), which Lightning runs in training mode, so dropout "
                  f"is active and BatchNorm uses and updates batch statistics: the metrics are noisy and wrong",
                  fix=f"move the evaluation into validation_step (Lightning switches to eval mode and no_grad there), or "
                      f"call {holder}.eval() before the loop and {holder}.train() after it")


def lightning_graph_in_eval(ix: FileIndex) -> Iterator[Hit]:
    for func, loop, call, holder in lightning_eval_loops(ix):
        if ix.under_no_grad(call) or any(
                isinstance(n, ast.Call) and (dotted(n.func) or "").endswith(("autograd.grad", "enable_grad"))
                for n in ix.scope_nodes(loop)):
            continue
        yield Hit("graph-in-eval", call,
                  f"this loop evaluates {holder} inside {func.name}(), where Lightning keeps autograd on: a graph is "
                  f"built and kept for every batch, costing memory and time for gradients nobody reads",
                  fix="move the evaluation into validation_step (Lightning runs it under no_grad), or wrap the loop in "
                      "`with torch.no_grad():`")


def lightning_eval_mode_left(ix: FileIndex) -> Iterator[Hit]:
    """``self.eval()`` / ``pl_module.eval()`` in a hook Lightning runs while training, never undone: Lightning
    (2.2 on) does not switch back to training mode, and its validation loop restores the mode it found."""
    for cls in ix.classes.values():
        kind = class_kind(ix, cls)
        if kind not in ("lightning-module", "lightning-callback"):
            continue
        for func in cls.body:
            if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or func.name not in TRAIN_HOOKS \
                    or func.name in _LAST_HOOKS:
                continue
            holder = _hook_model(func, kind)
            evs = events(ix, func.body, depth=2)
            for i, ev in enumerate(evs):
                if ev.kind != "eval" or ev.nested or ev.target != holder:
                    continue
                if any(later.kind == "train" for later in evs[i + 1:]):
                    break
                yield Hit("eval-mode-in-train", ev.site,
                          f"{holder}.eval() in {func.name}() is never undone: Lightning does not switch the module back "
                          f"to training mode (its validation loop restores the mode it found), so the following steps "
                          f"train with dropout off and BatchNorm frozen",
                          fix=f"call {holder}.train() when the evaluation is done (or move it into validation_step)")
                break


# --------------------------------------------------------------------------- HF Trainer.compute_loss


def _sets_loss_scaling(ix: FileIndex, cls: ast.ClassDef) -> bool:
    """Does the class (or an in-file base) tell Trainer how its loss is scaled (``model_accepts_loss_kwargs``,
    ``loss_is_scaled_for_ga``), or hand a ``compute_loss_func``?"""
    return any(isinstance(n, (ast.Name, ast.Attribute)) and (n.id if isinstance(n, ast.Name) else n.attr) in (
        "model_accepts_loss_kwargs", "loss_is_scaled_for_ga", "compute_loss_func")
        for cur in class_and_bases(ix, cls) for n in ast.walk(cur))


def hf_compute_loss_unscaled(ix: FileIndex) -> Iterator[Hit]:
    """accumulation-unscaled: a Trainer subclass's compute_loss that accepts ``num_items_in_batch`` and ignores it."""
    for func in ix.functions.get("compute_loss", []):
        parent = ix.parents.get(func)
        if not isinstance(parent, ast.ClassDef) or class_kind(ix, parent) != "hf-trainer":
            continue
        params = [a.arg for a in func.args.args + func.args.kwonlyargs]
        kwargs = func.args.kwarg.arg if func.args.kwarg else None
        if "num_items_in_batch" not in params and kwargs is None:
            continue  # an old signature: Trainer passes num_items_in_batch and the call fails loudly
        used = {n.id for n in ix.scope_nodes(func) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        if "num_items_in_batch" in used or (kwargs is not None and kwargs in used):
            continue  # used, or handed on (super().compute_loss(..., **kwargs))
        if not any(isinstance(n, ast.Constant) and n.value == "labels" for n in ix.scope_nodes(func)):
            continue  # Trainer counts num_items_in_batch only for batches with "labels"
        if _sets_loss_scaling(ix, parent):
            continue
        yield Hit("accumulation-unscaled", func,
                  f"{parent.name}.compute_loss ignores num_items_in_batch: from transformers 4.46 on, when the model's "
                  f"forward accepts loss kwargs (most do) and the batch has labels, Trainer takes the loss as already "
                  f"normalised by num_items_in_batch and no longer divides it by gradient_accumulation_steps, so under "
                  f"gradient accumulation each update is that many times too large (and the logged loss too)",
                  fix="divide the summed loss by num_items_in_batch (or pass it to the model), or set "
                      "self.model_accepts_loss_kwargs = False in __init__ so that Trainer divides the loss itself")
