"""One pass over a module's syntax tree: what every rule needs to know about names.

Lint follows names, not types: it records which names hold an optimizer, a
scheduler, a loss, a model, a data loader or a GradScaler (from what they are
assigned, or, failing that, from how they are named), how imports alias torch,
and which functions and classes the file defines.  Rules ask this index
questions instead of walking the tree again, which keeps lint fast.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from overt.lint.analysis.project import Project

FuncNode = ast.FunctionDef | ast.AsyncFunctionDef
LOOP_TYPES = (ast.For, ast.AsyncFor, ast.While)
SCOPE_TYPES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)

EVAL_TOKENS = frozenset({"val", "valid", "validation", "test", "testing", "eval", "evaluation", "dev", "holdout"})
EVAL_FUNC_TOKENS = frozenset({"evaluate", "evaluation", "eval", "validate", "validation", "valid", "val",
                              "predict", "prediction", "inference", "infer"})
MODEL_TOKENS = frozenset({"model", "net", "network", "module", "encoder", "decoder", "classifier",
                          "backbone", "generator", "discriminator", "netg", "netd", "critic", "student",
                          "teacher", "cnn", "mlp", "rnn", "lstm", "transformer", "ddp", "gen", "disc"})
NOT_MODEL_TOKENS = frozenset({"dict", "state", "states", "path", "paths", "file", "filename", "name", "names",
                              "config", "cfg", "args", "kwargs", "params", "parameters", "weights", "output",
                              "outputs", "out", "dir", "type", "fn", "func", "class", "cls", "id", "ckpt",
                              "checkpoint", "kind", "size", "url", "str", "list", "info", "loss", "losses",
                              "optimizer", "opt", "loader", "data", "dataset", "input", "inputs", "factory",
                              "builder", "fns", "hook", "hooks", "registry", "spec", "mode", "version"})
#: first words of a function that makes, fetches or changes a model rather than being one
VERB_TOKENS = frozenset({"unwrap", "wrap", "get", "load", "build", "create", "make", "init", "initialize",
                         "prepare", "save", "import", "enable", "disable", "set", "register", "setup", "convert",
                         "freeze", "unfreeze", "copy", "clone", "export", "compile", "print", "log", "instantiate"})
INT_DTYPES = frozenset({"long", "int64", "int32", "int", "int16", "int8", "uint8"})
FACTORIES = frozenset({"zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye",
                       "rand", "randn", "randint", "randperm", "tensor", "as_tensor", "from_numpy"})

_CAMEL = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|\d+")


def tokens(text: str) -> list[str]:
    """Lower-case word tokens of the last component of a dotted name:
    ``self.optimizerD`` -> ``['optimizer', 'd']``, ``train_loader`` -> ``['train', 'loader']``."""
    last = text.rsplit(".", 1)[-1]
    out: list[str] = []
    for part in last.split("_"):
        out += [t.lower() for t in _CAMEL.findall(part)] or ([part.lower()] if part else [])
    return out


def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for Name/Attribute chains, else None."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
        return ".".join(reversed(parts))
    return None


def kwarg(call: ast.Call, name: str) -> ast.expr | None:
    """The value of keyword ``name`` in ``call``, or None."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    return None


def has_star_kwargs(call: ast.Call) -> bool:
    return any(kw.arg is None for kw in call.keywords)


def is_const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def names_in(node: ast.AST) -> set[str]:
    """Every Name id and Attribute attr under ``node``."""
    out: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            out.add(sub.id)
        elif isinstance(sub, ast.Attribute):
            out.add(sub.attr)
    return out


@dataclass
class FileIndex:
    """Everything rules ask about one parsed module."""

    tree: ast.Module
    source_lines: list[str]
    parents: dict[ast.AST, ast.AST] = field(default_factory=dict)
    aliases: dict[str, str] = field(default_factory=dict)  # local name -> qualified
    # local name -> (module, relative-import level, imported symbol or None for `import module`)
    imports: dict[str, tuple[str | None, int, str | None]] = field(default_factory=dict)
    calls: list[ast.Call] = field(default_factory=list)
    attributes: list[ast.Attribute] = field(default_factory=list)
    classes: dict[str, ast.ClassDef] = field(default_factory=dict)
    functions: dict[str, list[FuncNode]] = field(default_factory=dict)
    loops: list[ast.stmt] = field(default_factory=list)
    assigns: dict[str, list[ast.expr]] = field(default_factory=dict)  # dotted target -> values
    optimizers: set[str] = field(default_factory=set)
    schedulers: dict[str, ast.Call] = field(default_factory=dict)
    losses: dict[str, str] = field(default_factory=dict)  # name -> loss class name
    models: set[str] = field(default_factory=set)
    loaders: dict[str, ast.Call] = field(default_factory=dict)
    scalers: set[str] = field(default_factory=set)
    module_classes: set[str] = field(default_factory=set)
    grad_globally_off: bool = False
    cache: dict = field(default_factory=dict)
    kids: dict[ast.AST, list[ast.AST]] = field(default_factory=dict)
    path: Path | None = None  # the file, when linted from disk (project imports resolve next to it)
    project: "Project | None" = None

    # -- construction -------------------------------------------------------
    @classmethod
    def build(cls, tree: ast.Module, source: str, path: Path | None = None,
              project: "Project | None" = None) -> "FileIndex":
        idx = cls(tree=tree, source_lines=source.splitlines(), path=path, project=project)
        parents, kids = idx.parents, idx.kids
        for node in ast.walk(tree):
            children = list(ast.iter_child_nodes(node))
            kids[node] = children
            for child in children:
                parents[child] = node
            if isinstance(node, ast.Call):
                idx.calls.append(node)
            elif isinstance(node, ast.Attribute):
                idx.attributes.append(node)
            elif isinstance(node, LOOP_TYPES):
                idx.loops.append(node)
            elif isinstance(node, ast.ClassDef):
                idx.classes[node.name] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                idx.functions.setdefault(node.name, []).append(node)
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        idx.aliases[a.asname] = a.name
                        idx.imports[a.asname] = (a.name, 0, None)
                    else:
                        top = a.name.split(".")[0]
                        idx.aliases[top] = top
                        idx.imports[top] = (top, 0, None)
            elif isinstance(node, ast.ImportFrom):
                for a in node.names:
                    if node.module:
                        idx.aliases[a.asname or a.name] = f"{node.module}.{a.name}"
                    idx.imports[a.asname or a.name] = (node.module, node.level, a.name)
            elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    elts = t.elts if isinstance(t, (ast.Tuple, ast.List)) else [t]
                    for e in elts:
                        name = dotted(e)
                        if name:
                            idx.assigns.setdefault(name, []).append(node.value)
        idx.loops.sort(key=lambda n: (n.lineno, n.col_offset))
        idx.calls.sort(key=lambda n: (n.lineno, n.col_offset))
        idx._find_module_classes()
        idx._classify_names()
        return idx

    def _find_module_classes(self) -> None:
        changed = True
        while changed:
            changed = False
            for name, node in self.classes.items():
                if name in self.module_classes:
                    continue
                for base in node.bases:
                    q = self.qualname(base) or ""
                    last = q.rsplit(".", 1)[-1]
                    if (last in self.module_classes or last == "LightningModule"
                            or (self.is_torchish(q) and ".nn." in f".{q}" and last[:1].isupper()
                                and not last.endswith("Loss"))
                            or q in ("nn.Module", "Module", "torch.nn.Module")):
                        self.module_classes.add(name)
                        changed = True
                        break

    def _classify_names(self) -> None:
        for name, values in self.assigns.items():
            for value in values:
                call = value
                # unwrap `X(...).to(device)` / `.cuda()`
                while (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                       and call.func.attr in ("to", "cuda", "cpu", "float", "double", "half")):
                    call = call.func.value
                if isinstance(call, ast.Name) and call.id in self.models:
                    self.models.add(name)
                if not isinstance(call, ast.Call):
                    continue
                q = self.qualname(call.func) or ""
                last = q.rsplit(".", 1)[-1]
                torchish = self.is_torchish(q)
                if last in self.module_classes or (torchish and last in ("DataParallel", "DistributedDataParallel")):
                    self.models.add(name)
                elif torchish and ".lr_scheduler." in f".{q}.":
                    self.schedulers[name] = call
                elif torchish and ".optim." in f".{q}." and last[:1].isupper():
                    self.optimizers.add(name)
                elif q.endswith("optimizers") and q.startswith("self"):
                    self.optimizers.add(name)
                elif torchish and last.endswith("Loss"):
                    self.losses[name] = last
                elif torchish and ".nn." in f".{q}" and last[:1].isupper():
                    self.models.add(name)
                elif q.startswith("torchvision.models.") or q.startswith("timm."):
                    self.models.add(name)
                elif last == "DataLoader":
                    self.loaders[name] = call
                elif last == "GradScaler":
                    self.scalers.add(name)
                elif last == "compile" and call.args and dotted(call.args[0]) in self.models:
                    self.models.add(name)
        self.grad_globally_off = any(
            isinstance(c.func, ast.Attribute) and isinstance(self.parents.get(c), ast.Expr) and (
                (c.func.attr == "set_grad_enabled" and c.args and is_const(c.args[0], False))
                # `torch.no_grad().__enter__()`: entered for the rest of the script, never left
                or (c.func.attr == "__enter__" and isinstance(c.func.value, ast.Call) and _is_no_grad(c.func.value)))
            for c in self.calls)

    @property
    def is_test_file(self) -> bool:
        """A pytest/unittest module (``test_*.py``, ``*_test.py``, ``conftest.py``): code that reads the
        files it wrote and calls ``forward`` on purpose."""
        if self.path is None:
            return False
        name = self.path.name
        return name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"

    # -- name resolution ----------------------------------------------------
    def qualname(self, node: ast.AST | None) -> str | None:
        """Dotted name with the first component resolved through imports."""
        name = dotted(node)
        if name is None:
            return None
        head, _, rest = name.partition(".")
        if head in self.aliases:
            head = self.aliases[head]
        return f"{head}.{rest}" if rest else head

    def is_torchish(self, qual: str) -> bool:
        """True when ``qual`` comes from torch (or lightning/torchvision), or is a
        conventional alias (``nn``, ``F``, ``optim``) or bare name that was not
        imported from anywhere else (notebook cells, snippets)."""
        head = qual.split(".")[0]
        if head in ("torch", "lightning", "pytorch_lightning", "torchvision"):
            return True
        if "." in qual:
            return head not in self.aliases and head in ("nn", "F", "optim", "functional")
        return qual not in self.aliases

    def call_is(self, call: ast.Call, *names: str) -> bool:
        """Does ``call`` call torch's ``names`` (matched on the last component)?"""
        q = self.qualname(call.func)
        if q is None:
            return False
        last = q.rsplit(".", 1)[-1]
        return last in names and self.is_torchish(q)

    # -- roles ----------------------------------------------------------------
    def is_optimizer(self, text: str | None) -> bool:
        if not text:
            return False
        if text in self.optimizers:
            return True
        if text in self.schedulers or "sched" in text.lower():
            return False
        toks = tokens(text)
        last = text.rsplit(".", 1)[-1].lower()
        return any(t.startswith("optim") or t == "opt" for t in toks) or last.startswith("optim")

    def is_scheduler(self, text: str | None) -> bool:
        return bool(text) and (text in self.schedulers or "sched" in text.lower())

    def is_scaler(self, text: str | None) -> bool:
        return bool(text) and (text in self.scalers or "scaler" in text.lower())

    def is_model(self, text: str | None) -> bool:
        if not text or text in ("self", "super"):
            return False
        if text in self.models:
            return True
        if text in self.losses or text in self.optimizers or text in self.loaders:
            return False
        toks = tokens(text)
        if any(t in NOT_MODEL_TOKENS for t in toks) or (toks and toks[0] in VERB_TOKENS):
            return False  # `accelerator.unwrap_model`, `importlib.import_module`: a function that returns one
        if text.split(".")[0] in ("torch", "np", "numpy") and ".nn." not in f".{text}.":
            return False  # torch.Generator, torch.cuda.Stream
        return any(t in MODEL_TOKENS for t in toks) or text.rsplit(".", 1)[-1].lower().startswith(("model", "net"))

    def is_loss_fn(self, call: ast.Call) -> str | None:
        """The loss kind a call computes (``CrossEntropyLoss``, ``cross_entropy``...), or None."""
        key = ("loss", id(call))
        if key not in self.cache:
            self.cache[key] = self._loss_kind(call)
        return self.cache[key]

    def _loss_kind(self, call: ast.Call) -> str | None:
        text = dotted(call.func)
        if text and text.startswith("self.") and text.count(".") == 1 and text in self.losses:
            kind = self._self_loss(call, text[5:])
            if kind is not None:
                return kind or None
        if text and text in self.losses and not text.startswith("self."):
            return self.losses[text]
        if isinstance(call.func, ast.Call):  # nn.CrossEntropyLoss()(out, y)
            q = self.qualname(call.func.func) or ""
            if q.endswith("Loss") and self.is_torchish(q):
                return q.rsplit(".", 1)[-1]
        q = self.qualname(call.func) or ""
        last = q.rsplit(".", 1)[-1]
        if "." in q and self.is_torchish(q) and (last.endswith("_loss") or last in (
                "cross_entropy", "binary_cross_entropy", "binary_cross_entropy_with_logits", "nll_loss", "kl_div")):
            return last
        bare = (text or "").replace("self.", "")
        if bare in ("criterion", "loss_fn", "lossfn", "loss_func", "loss_function", "crit", "loss_module") \
                or bare.startswith("criterion"):
            return "unknown"
        return None

    def _self_loss(self, call: ast.Call, attr: str) -> str | None:
        """The loss ``self.<attr>`` holds in the class of ``call`` (and its in-file bases): attributes are typed
        per class, not per file (two classes' ``self.loss`` may be two different losses).  "" when the class
        assigns it something else or several losses; None when no class of the chain assigns it."""
        cls = self.enclosing_class(call)
        chain, todo = [], [cls] if cls is not None else []
        while todo:
            c = todo.pop()
            if c in chain:
                continue
            chain.append(c)
            todo.extend(self.classes[b] for b in ((dotted(x) or "").rsplit(".", 1)[-1] for x in c.bases)
                        if b in self.classes)
        for c in chain:  # the class's own assignment first, then its bases'
            kinds = self._class_attr_kinds(c).get(attr)
            if kinds:
                return next(iter(kinds)) if len(kinds) == 1 else ""
        return None

    def _class_attr_kinds(self, cls: ast.ClassDef) -> dict[str, set[str]]:
        """``self.X`` of ``cls`` -> what its assignments hold: a loss class name, or "" for anything else
        (one walk of the class, cached)."""
        key = ("self_attr_kinds", id(cls))
        found = self.cache.get(key)
        if found is None:
            found = {}
            for n in ast.walk(cls):
                if not isinstance(n, (ast.Assign, ast.AnnAssign)) or n.value is None:
                    continue
                for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                    if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                        q = self.qualname(n.value.func) or "" if isinstance(n.value, ast.Call) else ""
                        kind = q.rsplit(".", 1)[-1] if q.endswith("Loss") and self.is_torchish(q) else ""
                        found.setdefault(t.attr, set()).add(kind)
            self.cache[key] = found
        return found

    def loader_role(self, text: str) -> str | None:
        """'train', 'eval' or None from a loader/data name."""
        toks = tokens(text)
        low = text.rsplit(".", 1)[-1].lower()
        if any(t in EVAL_TOKENS for t in toks) or low.startswith(("val", "test", "eval", "valid")):
            return "eval"
        if "train" in toks or "training" in toks or low.startswith("train"):
            return "train"
        return None

    # -- tree navigation -------------------------------------------------------
    def scope_nodes(self, node: ast.AST) -> list[ast.AST]:
        """``walk_scope(node)`` as a cached list (pre-order, source order, no nested scopes)."""
        key = ("scope", id(node))
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        out: list[ast.AST] = []
        kids = self.kids
        stack = [node]
        while stack:
            cur = stack.pop()
            out.append(cur)
            children = [c for c in kids.get(cur, ()) if not isinstance(c, SCOPE_TYPES)]
            stack.extend(reversed(children))
        self.cache[key] = out
        return out

    def stmts_nodes(self, stmts: list[ast.stmt]) -> list[ast.AST]:
        out: list[ast.AST] = []
        for stmt in stmts:
            if not isinstance(stmt, SCOPE_TYPES):
                out.extend(self.scope_nodes(stmt))
        return out

    def ancestors(self, node: ast.AST):
        cur = self.parents.get(node)
        while cur is not None:
            yield cur
            cur = self.parents.get(cur)

    def enclosing_function(self, node: ast.AST) -> FuncNode | None:
        for anc in self.ancestors(node):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                return anc
            if isinstance(anc, (ast.Lambda, ast.ClassDef)):
                return None
        return None

    def enclosing_class(self, node: ast.AST) -> ast.ClassDef | None:
        for anc in self.ancestors(node):
            if isinstance(anc, ast.ClassDef):
                return anc
        return None

    def enclosing_loops(self, node: ast.AST) -> list[ast.stmt]:
        """Loops around ``node`` inside its own scope, innermost first."""
        out = []
        for anc in self.ancestors(node):
            if isinstance(anc, SCOPE_TYPES):
                break
            if isinstance(anc, LOOP_TYPES):
                out.append(anc)
        return out

    def statement_of(self, node: ast.AST) -> ast.stmt:
        cur = node
        while not isinstance(cur, ast.stmt):
            cur = self.parents[cur]
        return cur

    def under_no_grad(self, node: ast.AST) -> bool:
        """Inside ``with torch.no_grad()/inference_mode()/set_grad_enabled(False)``
        or a function decorated with one of them."""
        for anc in self.ancestors(node):
            if isinstance(anc, (ast.With, ast.AsyncWith)):
                for item in anc.items:
                    if _is_no_grad(item.context_expr):
                        return True
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef)):
                if any(_is_no_grad(d) for d in anc.decorator_list):
                    return True
                return False
        return False

    def call_sites(self, func: FuncNode) -> list[ast.Call]:
        """Calls in this file of a function with ``func``'s name (``f(...)`` or ``x.f(...)``)."""
        out = []
        for call in self.calls:
            f = call.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name == func.name and not any(a is func for a in self.ancestors(call)):
                out.append(call)
        return out

    def callee(self, call: ast.Call) -> FuncNode | None:
        """The in-file function a call reaches (``f()`` or ``self.f()``), if exactly one."""
        f = call.func
        if isinstance(f, ast.Name):
            cands = self.functions.get(f.id, [])
        elif isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("self", "cls"):
            cands = self.functions.get(f.attr, [])
        else:
            return None
        return cands[0] if len(cands) == 1 else None

    def segment(self, node: ast.AST) -> str:
        try:
            lines = self.source_lines[node.lineno - 1: node.end_lineno]
            if not lines:
                return ""
            if len(lines) == 1:
                return lines[0][node.col_offset:node.end_col_offset]
            lines[0] = lines[0][node.col_offset:]
            lines[-1] = lines[-1][:node.end_col_offset]
            return "\n".join(lines)
        except (AttributeError, TypeError):
            return ""


def _is_no_grad(expr: ast.AST) -> bool:
    target = expr.func if isinstance(expr, ast.Call) else expr
    name = dotted(target) or ""
    last = name.rsplit(".", 1)[-1]
    if last in ("no_grad", "inference_mode"):
        return not (isinstance(expr, ast.Call) and expr.args and is_const(expr.args[0], False))
    if last == "set_grad_enabled" and isinstance(expr, ast.Call) and expr.args:
        return is_const(expr.args[0], False)
    return False
