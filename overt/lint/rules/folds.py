"""A model trained on in every fold of a cross-validation, or every repetition of an experiment, without being
built again (OVT612 ``model-carried-across-folds``, issue 33: repeated runs start fresh).

An invariant of every correct cross-validation: each fold trains a model that has seen nothing but that fold's
training data, so its validation data is unseen.  A model (with its optimizer) built once, before the fold loop,
and trained in it breaks it: fold k starts from the weights fitted on folds 1..k-1, whose training data held
fold k's validation samples, and every later fold scores samples the model already learned, so the reported
cross-validated score is optimistic.  The same holds for repetitions of an experiment (seeds, runs, trials):
a repetition that goes on training the previous one's model is not a repetition.

The rule: a ``for`` loop that is recognisably a fold or repetition loop (it iterates a scikit-learn splitter's
``split(...)``, or its target or iterable is named for folds, seeds, runs, repetitions or trials and its body
evaluates something), whose body trains a model -- ``opt.step()`` on an optimizer built on
``model.parameters()``, ``trainer.fit(model, ...)``, a ``train*``/``fit*`` function called with the model --
where the model is a name given its value before the loop (or a parameter of the function) and the loop
neither assigns it again nor resets it (``load_state_dict``, ``reset_parameters``, ``apply``, a call named for
resetting or initialising, in the loop or in an in-file function it calls).  Anything else stays silent.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import EVAL_TOKENS, VERB_TOKENS, FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_SPLITTER = re.compile(r"(KFold|Fold|ShuffleSplit|LeaveOneOut|LeavePOut|LeaveOneGroupOut|LeavePGroupsOut|"
                       r"TimeSeriesSplit|PredefinedSplit|GroupKFold)$")
_FOLD_WORDS = frozenset({"fold", "folds", "kfold", "kfolds", "cv"})
_REPEAT_WORDS = frozenset({"seed", "seeds", "rep", "reps", "repeat", "repeats", "repetition", "repetitions",
                           "trial", "trials", "run", "runs", "experiment", "experiments"})
_SCORE_WORDS = EVAL_TOKENS | frozenset({"evaluate", "score", "scores", "accuracy", "acc", "accs", "metric",
                                        "metrics", "auc", "f1", "rmse", "mae"})
_TRAIN_WORDS = frozenset({"train", "fit", "finetune", "training", "trainer"})
#: words of a function that does something else around the training (``get_train_loader(model)``, ``test``)
_NOT_TRAINING = EVAL_TOKENS | frozenset({"evaluate", "test", "loader", "loaders", "data", "dataset", "datasets",
                                         "transform", "transforms", "split", "sampler", "config", "args", "plot"})
_RESET_ATTRS = frozenset({"load_state_dict", "reset_parameters", "apply", "__init__", "set_weights",
                          "load_weights", "from_pretrained"})
_RESET_WORDS = re.compile(r"reset|reinit|init_weight|initiali[sz]e|weights_init|init_param|"
                          r"restore_(weights|model|state)|load_(weights|model|checkpoint|state)", re.I)


def _name_words(node: ast.AST) -> set[str]:
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.update(tokens(sub.id))
        elif isinstance(sub, ast.Attribute):
            out.update(tokens(sub.attr))
    return out


def _splitter(ix: FileIndex, expr: ast.AST) -> bool:
    """Does ``expr`` hold a ``.split(...)`` of a scikit-learn style splitter (``KFold(5).split(X)``, ``skf.split``
    with ``skf = StratifiedKFold(...)``)?"""
    for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "split"):
            continue
        recv = call.func.value
        values = [recv] if isinstance(recv, ast.Call) else ix.assigns.get(dotted(recv) or "", [])
        for value in values:
            if isinstance(value, ast.Call) and _SPLITTER.search((dotted(value.func) or "").rsplit(".", 1)[-1]):
                return True
    return False


def _kind(ix: FileIndex, loop: ast.For) -> str | None:
    """'fold' or 'repetition' when ``loop`` is one, else None."""
    if _splitter(ix, loop.iter):
        return "fold"
    target = _name_words(loop.target)
    if "train" in target and target & EVAL_TOKENS and "split" in _name_words(loop.iter):
        return "fold"  # `for i, (train_idx, valid_idx) in enumerate(cv.split(X, y))`
    words = target | _name_words(loop.iter)
    if not (words & (_FOLD_WORDS | _REPEAT_WORDS)):
        return None
    if not (set().union(*(_name_words(stmt) for stmt in loop.body)) & _SCORE_WORDS):
        return None  # nothing is evaluated per iteration: a sequence of data chunks, not folds
    return "fold" if words & _FOLD_WORDS else "repetition"


def _params_of(expr: ast.AST) -> set[str]:
    """Models whose parameters ``expr`` reads: ``model.parameters()``, ``model.fc.named_parameters()``."""
    out = set()
    for call in (n for n in ast.walk(expr) if isinstance(n, ast.Call)):
        if isinstance(call.func, ast.Attribute) and call.func.attr in ("parameters", "named_parameters"):
            name = dotted(call.func.value)
            if name:
                out.add(name.split(".")[0])
    return out


def _trained(ix: FileIndex, body: list[ast.stmt], optimizers: dict[str, set[str]]) -> dict[str, ast.AST]:
    """Model name -> the first node in ``body`` that trains it."""
    out: dict[str, ast.AST] = {}
    calls = [n for n in ix.stmts_nodes(body) if isinstance(n, ast.Call)]
    for node in sorted(calls, key=lambda n: (n.lineno, n.col_offset)):
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "step" and not node.args:
            for model in optimizers.get(dotted(func.value) or "", ()):
                out.setdefault(model, node)
            continue
        if isinstance(func, ast.Attribute) and func.attr == "fit":
            receiver = dotted(func.value) or ""
            args = list(node.args[:1]) + [k.value for k in node.keywords if k.arg == "model"]
            for arg in args:
                name = dotted(arg)
                if name and name != receiver and ix.is_model(name):
                    out.setdefault(name, node)
            continue
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        words = set(tokens(name))
        first = tokens(name)[:1]
        args = [dotted(a) or "" for a in list(node.args) + [k.value for k in node.keywords]]
        verb = bool(first) and first[0] in VERB_TOKENS  # prepare(model, opt), get_train_loader(model)
        named = words & _TRAIN_WORDS and not words & _NOT_TRAINING and not verb
        given_optimizer = any(ix.is_optimizer(a) for a in args) and not verb and not words & (
            EVAL_TOKENS | {"evaluate", "test"})
        if named or given_optimizer:  # train(model, ...), or a function handed the model and its optimizer
            for arg_name in args:
                if arg_name and "." not in arg_name and ix.is_model(arg_name):
                    out.setdefault(arg_name, node)
    return out


def _resets(ix: FileIndex, body: list[ast.stmt], model: str, depth: int = 0) -> bool:
    """Does ``body`` give ``model`` a value again or reset its weights (itself, or in an in-file function it
    calls)?"""
    for node in ix.stmts_nodes(body):
        if isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign, ast.For, ast.With, ast.NamedExpr)):
            targets = (node.targets if isinstance(node, ast.Assign) else [node.target] if not isinstance(
                node, ast.With) else [i.optional_vars for i in node.items if i.optional_vars is not None])
            value = getattr(node, "value", None) if not isinstance(node, (ast.For, ast.With)) else None
            if value is not None and any(isinstance(n, ast.Name) and n.id == model for n in ast.walk(value)):
                continue  # `model = model.to(device)`, `model, opt = accelerator.prepare(model, opt)`: the same model
            for t in targets:
                if any(isinstance(n, ast.Name) and n.id == model for n in ast.walk(t)):
                    return True
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
        receiver = dotted(func.value) or "" if isinstance(func, ast.Attribute) else ""
        owner = receiver.split(".")[0]
        if name == "reset_parameters" or (name == "load_state_dict" and not (
                ix.is_optimizer(receiver) or ix.is_scheduler(receiver) or ix.is_scaler(receiver))):
            return True  # weights loaded or reset in the loop: maybe the model's through another name
        involved = owner == model or any((dotted(a) or "").split(".")[0] == model for a in node.args)
        if _RESET_WORDS.search(name) and (involved or isinstance(func, ast.Name)):
            return True  # reset_weights(model), model.init_weights(), reinitialize(): not `metric.reset()`
        if name in _RESET_ATTRS and owner == model:
            return True
        if depth < 2:
            callee = ix.callee(node)
            if callee is not None and _resets(ix, callee.body, model, depth + 1):
                return True
    return False


def _scope_body(ix: FileIndex, loop: ast.stmt) -> tuple[list[ast.stmt], set[str]]:
    func = ix.enclosing_function(loop)
    if func is None:
        return ix.tree.body, set()
    params = {a.arg for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs}
    return func.body, params


def _built_before(ix: FileIndex, scope: list[ast.stmt], loop: ast.stmt, model: str) -> ast.AST | None:
    """The assignment that gives ``model`` its value before ``loop`` in ``scope``, if any."""
    found = None
    for node in ix.stmts_nodes(scope):
        if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.lineno < loop.lineno and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for e in t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]:
                    if isinstance(e, ast.Name) and e.id == model:
                        found = node if found is None or node.lineno > found.lineno else found
    return found


def _optimizers(ix: FileIndex, scope: list[ast.stmt]) -> dict[str, set[str]]:
    """Optimizer name -> the models whose parameters its constructors in ``scope`` (a function's or the module's
    own statements, the loop's included) read."""
    out: dict[str, set[str]] = {}
    for node in ix.stmts_nodes(scope):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Call):
            for t in node.targets:
                name = dotted(t)
                if name and ix.is_optimizer(name):
                    out.setdefault(name, set()).update(_params_of(node.value))
    return out


@rule("model-carried-across-folds")
def model_carried_across_folds(ix: FileIndex) -> Iterator[Hit]:
    for loop in ix.loops:
        if not isinstance(loop, ast.For):
            continue
        kind = _kind(ix, loop)
        if kind is None:
            continue
        scope, params = _scope_body(ix, loop)
        for model, where in _trained(ix, loop.body, _optimizers(ix, scope)).items():
            if _resets(ix, loop.body, model):
                continue
            built = _built_before(ix, scope, loop, model)
            if built is None and model not in params:
                continue
            if any(_kind(ix, outer) is not None and _resets(ix, outer.body, model) for outer in ix.enclosing_loops(loop)
                   if isinstance(outer, ast.For) and outer is not loop):
                continue
            origin = (f"built once at line {built.lineno}, before the loop" if built is not None
                      else "passed in as a parameter and never built again in it")
            if kind == "fold":
                why = ("each fold goes on training the model of the folds before it, whose training data held this "
                       "fold's validation samples, so every fold after the first scores samples the model has "
                       "already learned and the cross-validated score is optimistic")
            else:
                why = ("each repetition starts from the weights the previous one ended with, so the repetitions "
                       "are one longer training, not independent runs, and their mean and spread mean nothing")
            yield Hit("model-carried-across-folds", loop,
                      f"this {kind} loop trains `{model}` (`{ix.segment(where)}`, line {where.lineno}), {origin}: "
                      f"{why}",
                      fix=f"build `{model}` and its optimizer at the top of each {kind} (e.g. `{model} = "
                          f"make_model()`), or save `initial = copy.deepcopy({model}.state_dict())` before the loop "
                          f"and `{model}.load_state_dict(initial)` (with a new optimizer) at the top of each {kind}")
            break
