"""Monte Carlo dropout samples drawn in eval mode (OVT213 ``mc-samples-identical``, issue 33: Monte Carlo samples
differ).

An invariant of every Monte Carlo estimate: the samples differ.  Monte Carlo dropout draws T stochastic passes of
the same input and reads the uncertainty from their spread; with the model in eval mode every dropout layer is
off, the T passes are one deterministic pass T times, the variance is 0 for every input and any uncertainty built
on it ranks errors at chance.

The rule (the visible form): a list comprehension, a generator or a ``for`` loop over ``range(T)`` whose index is
unused, that calls a model on an input the loop does not change and stacks, concatenates or averages the results
(``torch.stack``, ``torch.cat``, ``np.array``, ``.mean``/``.var``/``.std``), where the model was put in eval mode
earlier in the same function (``model.eval()``, unconditionally) and nothing between them (or in the loop)
switches anything back to training mode (``.train()``, ``.apply(...)``, ``.training = True``, a call named for
dropout or Monte Carlo).  The model must be one whose only randomness is dropout: built in this file (an
``nn.Sequential`` or an ``nn.Module`` class with ``nn.Dropout`` layers or ``F.dropout(..., training=self.training)``
and no sampling of its own), or named for dropout by the code around it.  Anything else stays silent: a VAE or a
Bayesian layer samples in eval mode too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule

_AGGREGATES = frozenset({"stack", "cat", "concat", "concatenate", "vstack", "hstack", "dstack", "array", "asarray",
                         "mean", "var", "std", "tensor", "nanmean", "nanvar", "nanstd"})
_RANDOM = re.compile(r"^(randn|rand|randn_like|rand_like|randint|randint_like|randperm|normal|normal_|bernoulli|"
                     r"bernoulli_|multinomial|rsample|sample|uniform_|exponential_|poisson|gumbel_softmax|"
                     r"Normal|Bernoulli|Categorical|Gumbel|RelaxedBernoulli|Uniform)$")
_STOCHASTIC_MODULE = re.compile(r"Noise|Bayes|Variational|Stochastic|Sampl|Concrete|Gumbel", re.I)
_REENABLE = re.compile(r"dropout|mc|monte|carlo|stochastic|enable|sampl", re.I)
_PASSTHROUGH = frozenset({"to", "cuda", "cpu", "float", "double", "half", "contiguous", "unsqueeze", "view",
                          "reshape", "permute", "transpose", "squeeze", "flatten", "detach"})


def _last(func: ast.AST) -> str:
    return func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""


def _static_input(arg: ast.AST, changing: set[str]) -> bool:
    """Is ``arg`` the same tensor on every pass: names, attributes and subscripts that the loop does not change,
    through layout-only methods (``x.to(device)``)?"""
    if isinstance(arg, ast.Starred):
        return False
    for node in ast.walk(arg):
        if isinstance(node, ast.Call):
            if not (isinstance(node.func, ast.Attribute) and node.func.attr in _PASSTHROUGH):
                return False
        elif isinstance(node, ast.Name) and node.id in changing:
            return False
        elif not isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.Slice, ast.Tuple,
                                   ast.Load, ast.UnaryOp, ast.USub, ast.keyword)):
            return False
    return True


def _model_calls(ix: FileIndex, expr: ast.AST, changing: set[str]) -> list[ast.Call]:
    """Calls ``model(x)`` in ``expr`` of a model on an unchanging input, with nothing random around them."""
    calls = [n for n in ix.scope_nodes(expr) if isinstance(n, ast.Call)]
    if any(_RANDOM.match(_last(c.func)) for c in calls):
        return []  # noise added around the model: the passes differ on purpose
    out = []
    for call in calls:
        func = call.func
        if isinstance(func, ast.Attribute) and func.attr == "forward":
            func = func.value  # model.forward(x): the same pass, hooks aside
        name = dotted(func)
        if not name or not ix.is_model(name) or not call.args:
            continue
        if any(_REENABLE.search(k.arg or "") for k in call.keywords) or any(
                isinstance(k.value, ast.Constant) and k.value.value is True for k in call.keywords):
            continue  # model(x, mc_dropout=True): a forward asked to sample
        if all(_static_input(a, changing) for a in call.args) and all(
                _static_input(k.value, changing) for k in call.keywords):
            out.append(call)
    return out


def _aggregated(ix: FileIndex, node: ast.AST, scope: ast.AST) -> bool:
    """Are the values ``node`` makes (a comprehension, or a list name) stacked, averaged or spread-measured?"""
    parent = ix.parents.get(node)
    while isinstance(parent, ast.Call) and node in parent.args and _last(parent.func) in ("list", "tuple"):
        node, parent = parent, ix.parents.get(parent)  # torch.stack(tuple(model(x) for _ in range(T)))
    if isinstance(parent, ast.Call) and node in parent.args and _last(parent.func) in _AGGREGATES:
        return True
    if isinstance(parent, ast.Attribute) and parent.attr in _AGGREGATES:
        return True
    names: set[str] = set()
    if isinstance(node, ast.Name):
        names.add(node.id)
    elif isinstance(parent, ast.Assign):
        names.update(t.id for t in parent.targets if isinstance(t, ast.Name))
    if not names:
        return False
    for sub in ix.scope_nodes(scope):
        if isinstance(sub, ast.Call) and _last(sub.func) in _AGGREGATES and any(
                isinstance(a, ast.Name) and a.id in names for a in sub.args):
            return True
        if isinstance(sub, ast.Attribute) and sub.attr in _AGGREGATES and isinstance(sub.value, ast.Name) \
                and sub.value.id in names:
            return True
    return False


def _class_dropout(ix: FileIndex, cls: ast.ClassDef, depth: int = 0) -> bool | None:
    """True: the class's (and its in-file submodules') only randomness is dropout that follows the mode;
    False: no dropout; None: it samples otherwise (or dropout that ignores the mode)."""
    found = False
    for node in ast.walk(cls):
        if not isinstance(node, ast.Call):
            if isinstance(node, ast.Attribute) and node.attr == "training" and isinstance(
                    ix.parents.get(node), ast.Assign) and node in ix.parents[node].targets:
                return None  # sets its own mode
            continue
        last = _last(node.func)
        if _RANDOM.match(last) or _STOCHASTIC_MODULE.search(last) or last == "train":
            return None
        if last.endswith("Dropout") or last.endswith("Dropout1d") or last.endswith("Dropout2d") \
                or last.endswith("Dropout3d"):
            found = True
        elif last in ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout") and not (
                dotted(node.func) or "").startswith("self."):
            training = kwarg(node, "training")
            if training is None or dotted(training) != "self.training":
                return None  # always on (F.dropout defaults to training=True): the passes differ anyway
            found = True
        elif last in ix.classes and last in ix.module_classes and ix.classes[last] is not cls and depth < 3:
            inner = _class_dropout(ix, ix.classes[last], depth + 1)
            if inner is None:
                return None
            found = found or inner
    return found


def _dropout_only(ix: FileIndex, model: str) -> bool:
    """Is ``model`` built in this file with dropout as its only randomness?"""
    values = ix.assigns.get(model, [])
    if len(values) != 1:
        return False
    call = values[0]
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in _PASSTHROUGH:
        call = call.func.value
    if not isinstance(call, ast.Call):
        return False
    last = _last(call.func)
    if last == "Sequential":
        found = False
        for node in ast.walk(call):
            if isinstance(node, ast.Call) and node is not call:
                inner = _last(node.func)
                if "Dropout" in inner:
                    found = True
                elif _STOCHASTIC_MODULE.search(inner) or _RANDOM.match(inner):
                    return False
                elif inner in ix.classes:
                    return False  # a module of this file inside: judged by the class form only
        return found
    if last in ix.classes and last in ix.module_classes:
        return _class_dropout(ix, ix.classes[last]) is True
    return False


def _says_dropout(site: ast.AST, scope: ast.AST) -> bool:
    """Does the code name the passes for dropout: a name in the repeating construct (``range(mc_dropout_passes)``)
    or the function's name (``mc_dropout_predict``)?"""
    words: set[str] = set()
    if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
        words.update(tokens(scope.name))
    for sub in ast.walk(site):
        if isinstance(sub, ast.Name):
            words.update(tokens(sub.id))
        elif isinstance(sub, ast.Attribute):
            words.update(tokens(sub.attr))
    return "dropout" in words


def _eval_call(ix: FileIndex, scope: ast.AST, model: str, site: ast.AST) -> ast.Call | None:
    """The ``model.eval()`` that puts ``model`` in eval mode for ``site``: in ``scope`` before it, under no
    condition ``site`` is not under, and with nothing switched back to training mode between them."""
    site_stmt = ix.statement_of(site)
    site_anc = set(map(id, ix.ancestors(site)))
    found = None
    for node in ix.scope_nodes(scope):
        if not isinstance(node, ast.Call) or node.lineno >= site_stmt.lineno:
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and dotted(func.value) == model and (
                (func.attr == "eval" and not node.args)
                or (func.attr == "train" and node.args and isinstance(node.args[0], ast.Constant)
                    and node.args[0].value is False)):
            conditions = [a for a in ix.ancestors(node) if isinstance(a, (ast.If, ast.For, ast.While, ast.Try,
                                                                          ast.IfExp))]
            if all(id(a) in site_anc for a in conditions):
                if found is None or node.lineno > found.lineno:
                    found = node
    if found is None:
        return None
    for node in ix.scope_nodes(scope):
        line = getattr(node, "lineno", 0)
        if line < found.lineno or (line > site_stmt.end_lineno and node is not site_stmt):
            continue
        if _reenables(node) and node is not found:
            return None
    return found


def _reenables(node: ast.AST) -> bool:
    if isinstance(node, ast.Call):
        last = _last(node.func)
        if last == "train" and not (node.args and isinstance(node.args[0], ast.Constant)
                                    and node.args[0].value is False):
            return True
        if last in ("apply", "setattr"):
            return True
        if _REENABLE.search(last) and last not in ("no_grad",):
            return True
        return last == "map" and any(_REENABLE.search(dotted(a) or "") for a in node.args)
    if isinstance(node, ast.Assign):
        return any(isinstance(t, ast.Attribute) and t.attr == "training" for t in node.targets)
    return False


def _scope_of(ix: FileIndex, node: ast.AST) -> ast.AST:
    return ix.enclosing_function(node) or ix.tree


def _sites(ix: FileIndex) -> Iterator[tuple[ast.AST, ast.Call, ast.AST]]:
    """(the repeating construct, the model call in it, what holds the samples)."""
    for node in ast.walk(ix.tree):
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and len(node.generators) == 1:
            gen = node.generators[0]
            if gen.ifs or not isinstance(gen.target, ast.Name) or not (
                    isinstance(gen.iter, ast.Call) and _last(gen.iter.func) == "range"):
                continue
            if any(isinstance(n, ast.Name) and n.id == gen.target.id for n in ast.walk(node.elt)):
                continue
            for call in _model_calls(ix, node.elt, {gen.target.id}):
                yield node, call, node
        elif isinstance(node, ast.For) and isinstance(node.target, ast.Name) and isinstance(node.iter, ast.Call) \
                and _last(node.iter.func) == "range" and not node.orelse:
            body = ix.stmts_nodes(node.body)
            if any(isinstance(n, ast.Name) and n.id == node.target.id for n in body):
                continue
            changing = {node.target.id}
            for sub in body:
                if isinstance(sub, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                    for t in sub.targets if isinstance(sub, ast.Assign) else [sub.target]:
                        changing.update(n.id for n in ast.walk(t) if isinstance(n, ast.Name))
            outputs: set[str] = set()  # names that hold a pass's output (`logits = model(x)`, `p = softmax(logits)`)
            passes: list[ast.Call] = []
            for sub in sorted((n for n in body if isinstance(n, ast.Assign)), key=lambda n: n.lineno):
                calls = _model_calls(ix, sub.value, changing)
                if calls or any(isinstance(n, ast.Name) and n.id in outputs for n in ast.walk(sub.value)):
                    passes.extend(calls)
                    outputs.update(n.id for t in sub.targets for n in ast.walk(t) if isinstance(n, ast.Name))
            for sub in body:
                if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "append" \
                        and isinstance(sub.func.value, ast.Name) and len(sub.args) == 1:
                    direct = _model_calls(ix, sub.args[0], changing - {sub.func.value.id})
                    if direct:
                        yield node, direct[0], sub.func.value
                    elif passes and any(isinstance(n, ast.Name) and n.id in outputs for n in ast.walk(sub.args[0])):
                        yield node, passes[0], sub.func.value


@rule("mc-samples-identical")
def mc_samples_identical(ix: FileIndex) -> Iterator[Hit]:
    seen: set[int] = set()
    for site, call, holder in _sites(ix):
        if id(site) in seen:
            continue
        func = call.func.value if isinstance(call.func, ast.Attribute) and call.func.attr == "forward" else call.func
        model = dotted(func) or ""
        scope = _scope_of(ix, site)
        if not _aggregated(ix, holder, scope):
            continue
        if not (_dropout_only(ix, model) or _says_dropout(site, scope)):
            continue
        if any(_reenables(n) for n in ix.scope_nodes(site)):
            continue
        switched = _eval_call(ix, scope, model, site)
        if switched is None:
            continue
        seen.add(id(site))
        yield Hit("mc-samples-identical", call,
                  f"`{ix.segment(call)}` is called on the same input in every pass of a Monte Carlo loop (line "
                  f"{site.lineno}) to sample dropout, but `{ix.segment(switched)}` (line {switched.lineno}) turned "
                  "every dropout layer off and nothing switches them back on: the passes are identical, their "
                  "variance is 0 for every input and the uncertainty built from them ranks errors at chance",
                  fix=f"after `{model}.eval()`, switch only the dropout layers back to training mode for the passes: "
                      f"`for m in {model}.modules(): if isinstance(m, nn.Dropout): m.train()` (BatchNorm stays in "
                      f"eval mode)")
