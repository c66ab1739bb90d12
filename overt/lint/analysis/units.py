"""Units of training code every rule reasons about: training loops and steps,
evaluation regions, the names that hold tensors, labels and parameters."""

from __future__ import annotations

import ast

from overt.lint.analysis.events import events
from overt.lint.analysis.values import ClassRef, resolve_in, values_for
from overt.lint.index import EVAL_FUNC_TOKENS, FACTORIES, INT_DTYPES, FileIndex, FuncNode, dotted, kwarg, tokens

CLASSIFICATION_DATASETS = {"MNIST", "FashionMNIST", "KMNIST", "EMNIST", "QMNIST", "CIFAR10", "CIFAR100",
                           "SVHN", "STL10", "ImageFolder", "ImageNet", "Caltech101", "Food101", "Flowers102"}


_FRAMEWORK_HOOK_SUFFIXES = ("_step", "_epoch_end", "_end", "_start")


def loop_units(ix: FileIndex) -> list[ast.stmt]:
    """Innermost loops whose own body calls both ``backward()`` and an optimizer ``step()``."""
    if "loop_units" in ix.cache:
        return ix.cache["loop_units"]
    has: dict[int, bool] = {}
    for loop in ix.loops:
        kinds = {e.kind for e in events(ix, loop, depth=0)}
        has[id(loop)] = "backward" in kinds and "step" in kinds
    outer: set[int] = set()
    for loop in ix.loops:
        if has[id(loop)]:
            outer.update(id(enc) for enc in ix.enclosing_loops(loop))
    units = [lp for lp in ix.loops if has[id(lp)] and id(lp) not in outer]
    ix.cache["loop_units"] = units
    return units


def function_units(ix: FileIndex) -> list[ast.AST]:
    """Functions that call backward() and step() outside any training loop of their own
    (a ``train_step`` called from a loop elsewhere, a Lightning manual ``training_step``)."""
    if "function_units" in ix.cache:
        return ix.cache["function_units"]
    units = []
    unit_loops = loop_units(ix)
    for funcs in ix.functions.values():
        for func in funcs:
            kinds = {e.kind for e in events(ix, func.body, depth=0)}
            if "backward" in kinds and "step" in kinds and not any(
                    ix.enclosing_function(lp) is func for lp in unit_loops):
                units.append(func)
    ix.cache["function_units"] = units
    return units


def is_eval_function(func: FuncNode) -> bool:
    """Named like an evaluation routine (and not a framework hook such as Lightning's validation_step)."""
    name = func.name
    if name.startswith("on_") or name.endswith(_FRAMEWORK_HOOK_SUFFIXES) or name.startswith("test_"):
        return False
    toks = tokens(name)
    return bool(set(toks) & EVAL_FUNC_TOKENS) and "train" not in toks and "training" not in toks


def constructs_imported_class(ix: FileIndex, func: ast.expr) -> bool:
    """Is ``func(...)`` the construction of a class imported into this file (``from model import UNet``;
    ``model = UNet(...)``), not a run of a model?  The name must be bound here by that import alone, and
    name a module class of the project, or, when the import leads outside the project, be spelt like a
    class (``CapWords``, not a CONSTANT): calling a class builds a module, it runs none."""
    if not isinstance(func, ast.Name) or func.id in ix.assigns or func.id in ix.functions:
        return False
    module, level, symbol = ix.imports.get(func.id, (None, 0, None))
    if symbol is None:
        return False
    if isinstance(resolve_in(ix, func.id), ClassRef):
        return True
    outside = ix.project is None or ix.project.module(ix, module, level) is None
    return outside and symbol[:1].isupper() and any(c.islower() for c in symbol)


def model_calls(ix: FileIndex, node: ast.AST) -> list[ast.Call]:
    """Calls of a model under ``node``: a name that holds (or is named like) a model, or a
    name that holds an instance of a module class of the project (``clf = Net()``,
    ``def evaluate(clf: Net, ...)``)."""
    out = []
    for n in ix.scope_nodes(node):
        if isinstance(n, ast.Call) and isinstance(n.func, (ast.Name, ast.Attribute)):
            text = dotted(n.func)
            if not text or text in ix.functions or text in ix.classes or constructs_imported_class(ix, n.func):
                continue
            if ix.is_model(text) or (isinstance(n.func, ast.Name) and values_for(ix).may_hold_classes
                                     and values_for(ix).of(n.func).cls is not None):
                out.append(n)
    return out


def eval_regions(ix: FileIndex) -> list[tuple[ast.AST, ast.Call, bool]]:
    """(region, first model call, named-as-evaluation) for each evaluation loop or
    evaluation function: code that runs the model and never calls backward()/step().
    Loops only under no_grad (named neither way) come with ``False``."""
    if "eval_regions" in ix.cache:
        return ix.cache["eval_regions"]
    out: list[tuple[ast.AST, ast.Call, bool]] = []
    taken: set[int] = set()
    for loop in ix.loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        if any(id(enc) in taken for enc in ix.enclosing_loops(loop)):
            continue
        func = ix.enclosing_function(loop)
        if func is not None and ix.enclosing_class(func) is not None and \
                ix.enclosing_class(func).name in ix.module_classes:
            continue
        named = any(ix.loader_role(n) == "eval" for n in _iter_names(loop.iter)) or (
            func is not None and is_eval_function(func))
        if not named and not ix.under_no_grad(loop):
            continue
        kinds = {e.kind for e in events(ix, loop, depth=2)}
        if kinds & {"backward", "step"}:
            continue
        calls = model_calls(ix, loop)
        if calls:
            out.append((loop, calls[0], named))
            taken.add(id(loop))
    for funcs in ix.functions.values():
        for func in funcs:
            if not is_eval_function(func):
                continue
            cls = ix.enclosing_class(func)
            if cls is not None and cls.name in ix.module_classes:
                continue
            if any(ix.enclosing_function(r) is func for r, _, _ in out if not isinstance(r, ast.FunctionDef)):
                continue
            if {e.kind for e in events(ix, func.body, depth=2)} & {"backward", "step"}:
                continue
            calls = model_calls(ix, func)
            if calls:
                out.append((func, calls[0], True))
    ix.cache["eval_regions"] = out
    return out


def _iter_names(expr: ast.AST) -> list[str]:
    return [dotted(n) or "" for n in ast.walk(expr) if isinstance(n, (ast.Name, ast.Attribute))]


def is_factory(ix: FileIndex, call: ast.AST) -> bool:
    if not isinstance(call, ast.Call):
        return False
    q = ix.qualname(call.func) or ""
    return q.startswith("torch.") and q.count(".") == 1 and q.rsplit(".", 1)[-1] in FACTORIES


def loader_iter(ix: FileIndex, expr: ast.AST) -> str | None:
    """The loader name a for-loop iterates (``loader``, ``enumerate(loader)``, ``tqdm(loader)``)."""
    for n in ast.walk(expr):
        text = dotted(n) if isinstance(n, (ast.Name, ast.Attribute)) else None
        if text and (text in ix.loaders or "loader" in text.lower() or text.rsplit(".", 1)[-1] in ("dl", "batches")):
            return text
    return None


def target_names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]


def tensor_names(ix: FileIndex) -> set[str]:
    """Names that hold tensors: made by torch factories or drawn from a data loader."""
    if "tensor_names" in ix.cache:
        return ix.cache["tensor_names"]
    out: set[str] = set()
    for name, values in ix.assigns.items():
        if any(is_factory(ix, v) for v in values):
            out.add(name)
    for loop in ix.loops:
        # only tuple targets: a single `batch` may be a dict or an object whose .to() works in place
        if isinstance(loop, (ast.For, ast.AsyncFor)) and isinstance(loop.target, ast.Tuple) \
                and loader_iter(ix, loop.iter):
            tgt = loop.target
            enumerated = isinstance(loop.iter, ast.Call) and dotted(loop.iter.func) == "enumerate"
            if len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Tuple):
                tgt = tgt.elts[1]  # enumerate(loader)
            elif enumerated:
                continue  # `for i, batch in enumerate(loader)`: one batch object (a dict, a BatchEncoding whose .to() is in place)
            out.update(e.id for e in tgt.elts if isinstance(e, ast.Name))
    for name, values in ix.assigns.items():
        if any(isinstance(v, ast.Name) and v.id in out for v in values):
            out.add(name)
    out -= ix.models
    ix.cache["tensor_names"] = out
    return out


def label_names(ix: FileIndex) -> set[str]:
    """Names holding integer class indices: randint/argmax/.long()/integer dtype, or the
    second item drawn from a loader over a torchvision classification data set."""
    if "label_names" in ix.cache:
        return ix.cache["label_names"]
    out: set[str] = set()
    for name, values in ix.assigns.items():
        for v in values:
            if not isinstance(v, ast.Call):
                continue
            q = ix.qualname(v.func) or ""
            last = q.rsplit(".", 1)[-1]
            dtype = dotted(kwarg(v, "dtype")) or ""
            if (q in ("torch.randint",) or last in ("long", "argmax")
                    or (is_factory(ix, v) and dtype.rsplit(".", 1)[-1] in INT_DTYPES)):
                out.add(name)
    cls_loaders = set()
    for name, call in ix.loaders.items():
        ds = call.args[0] if call.args else kwarg(call, "dataset")
        cands = [ds] + (ix.assigns.get(dotted(ds) or "", []) if ds is not None else [])
        if any(isinstance(c, ast.Call) and (ix.qualname(c.func) or "").rsplit(".", 1)[-1] in CLASSIFICATION_DATASETS
               for c in cands):
            cls_loaders.add(name)
    for loop in ix.loops:
        if not isinstance(loop, (ast.For, ast.AsyncFor)):
            continue
        src = loader_iter(ix, loop.iter)
        if src in cls_loaders:
            tgt = loop.target
            if isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Tuple):
                tgt = tgt.elts[1]  # enumerate(loader)
            if isinstance(tgt, ast.Tuple) and len(tgt.elts) == 2 and isinstance(tgt.elts[1], ast.Name):
                out.add(tgt.elts[1].id)
    ix.cache["label_names"] = out
    return out


def param_names(ix: FileIndex) -> set[str]:
    """Loop variables bound to parameters (``for p in model.parameters()``)."""
    out: set[str] = set()
    for loop in ix.loops:
        if isinstance(loop, (ast.For, ast.AsyncFor)):
            calls = [n for n in ast.walk(loop.iter) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
            if any(c.func.attr in ("parameters", "named_parameters") for c in calls):
                names = target_names(loop.target)
                out.add(names[-1]) if names else None
    return out
