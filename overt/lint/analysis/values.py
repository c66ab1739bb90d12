"""What a value is: follow an expression back through names, attributes, calls, classes and files.

:meth:`Values.of` answers "what does this expression hold?" with a :class:`Value`:
the activation it ends in (``probs`` from softmax, ``sigmoid``, ``logprobs`` from
log-softmax, raw ``logits`` from a linear layer), whether it is a module (a torch
layer, a ``Sequential``/``ModuleList``/``ModuleDict`` with its members, or an
``nn.Module`` subclass of the project), a loss module or a loss value, integer
class labels.  It follows

- local names through their reaching definitions (:mod:`.defs`),
- ``self.X`` through the attribute facts of the class's ``__init__`` (plain
  assignment, ``add_module``/``register_module``, container members),
- ``model(x)`` through the class's ``forward`` summary (what every ``return``
  of ``forward`` holds, computed once per class),
- ``helper(x)`` through the function's return summary, and a function's
  parameters through its annotation or the arguments at its call sites in the file,
- classes and functions imported from other modules of the package through the
  project index (:mod:`.project`).

Where definitions disagree, the answer is "unknown" (every field at its
default): rules built on it stay silent rather than guess.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, replace

from overt.lint.analysis.defs import Def, ReachingDefs
from overt.lint.index import FACTORIES, INT_DTYPES, FileIndex, FuncNode, dotted, kwarg

MAX_DEPTH = 8
PASS_THROUGH = frozenset({"view", "reshape", "squeeze", "unsqueeze", "float", "double", "half", "to", "cuda",
                          "cpu", "contiguous", "flatten", "permute", "transpose", "clone", "type", "view_as",
                          "reshape_as", "bfloat16", "long", "int", "requires_grad_", "train", "eval"})
ACTIVATION_LAYERS = {"Softmax": "probs", "Sigmoid": "sigmoid", "LogSoftmax": "logprobs",
                     "Softmax2d": "probs", "LogSigmoid": "logsigmoid"}
ACTIVATION_FUNCS = {"softmax": "probs", "sigmoid": "sigmoid", "log_softmax": "logprobs", "logsigmoid": "logsigmoid"}
LINEAR_LAYERS = frozenset({"Linear", "LazyLinear", "Bilinear", "Conv1d", "Conv2d", "Conv3d"})
LABEL_CALLS = frozenset({"long", "argmax", "int"})


@dataclass(frozen=True, eq=False)
class ClassRef:
    """An ``nn.Module`` subclass defined in the project (``ix`` is its file)."""

    ix: FileIndex
    node: ast.ClassDef

    @property
    def name(self) -> str:
        return self.node.name

    def where(self, from_ix: FileIndex) -> str:
        """``line 12`` in the same file, ``models.py:12`` in another."""
        return _where(self.ix, self.node, from_ix)


@dataclass(frozen=True)
class Value:
    """What an expression holds; every field at its default means "unknown".

    ``head``: the activation the tensor ends in (``probs``, ``sigmoid``,
    ``logprobs``, ``logits``); ``origin``: where that was decided (for messages).
    ``layer``: a torch layer class name, ``cls``: a project module class, when the
    value is a module; ``members``: a container module's members by key (an int for
    positions, -1 for the last one, a string for ModuleDict keys).
    ``loss_module``: the loss class (``CrossEntropyLoss``) of a loss module;
    ``loss``: the loss kind when the value is a computed loss; ``labels``: integer
    class indices; ``tensor``: certainly a tensor (made by a torch factory or op).
    """

    head: str | None = None
    origin: str | None = None
    layer: str | None = None
    cls: ClassRef | None = None
    members: tuple | None = None
    loss_module: str | None = None
    loss: str | None = None
    labels: bool = False
    tensor: bool = False

    def member(self, key: object) -> "Value":
        for k, v in self.members or ():
            if k == key:
                return v
        return UNKNOWN

    @property
    def is_module(self) -> bool:
        return self.layer is not None or self.cls is not None


UNKNOWN = Value()


def join(values: list[Value]) -> Value:
    """The facts every value agrees on (``origin`` from the first)."""
    if not values:
        return UNKNOWN
    first = values[0]
    if len(values) == 1:
        return first
    kw = {}
    for f in ("head", "layer", "cls", "members", "loss_module", "loss", "labels", "tensor"):
        v = getattr(first, f)
        if all(getattr(o, f) == v for o in values[1:]):
            kw[f] = v
    if kw.get("head"):
        kw["origin"] = first.origin
    return Value(**kw)


def _where(ix: FileIndex, node: ast.AST, from_ix: FileIndex) -> str:
    line = getattr(node, "lineno", 1)
    if ix is from_ix or ix.path is None:
        return f"line {line}"
    return f"{ix.path.name}:{line}"


def values_for(ix: FileIndex) -> "Values":
    """The (cached) value analysis of one file."""
    an = ix.cache.get("values")
    if an is None:
        an = ix.cache["values"] = Values(ix)
    return an


class Values:
    """Value facts for one file; results are cached per node."""

    def __init__(self, ix: FileIndex):
        self.ix = ix
        self._flows: dict[int, ReachingDefs] = {}
        self._memo: dict[int, Value] = {}
        self._busy: set[int] = set()
        self._classes: dict[int, ClassRef] = {}
        self._attrs: dict[int, dict[str, Value]] = {}
        self._forward: dict[int, Value] = {}
        self._returns: dict[int, Value] = {}

    @property
    def may_hold_classes(self) -> bool:
        """Can a name here hold an instance of a project module class? (A class defined
        here, or a capitalised name imported from a module that is not torch's.)"""
        found = self.ix.cache.get("may_hold_classes")
        if found is None:
            found = bool(self.ix.module_classes) or any(
                sym and sym[:1].isupper() and not self.ix.is_torchish(f"{mod or ''}.{sym}".strip("."))
                for mod, _, sym in self.ix.imports.values())
            self.ix.cache["may_hold_classes"] = found
        return found

    # -- scopes -----------------------------------------------------------------
    def scope(self, node: ast.AST) -> ast.AST:
        """The function (or lambda) whose locals ``node`` reads, else the module."""
        for anc in self.ix.ancestors(node):
            if isinstance(anc, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                return anc
        return self.ix.tree

    def flow(self, scope: ast.AST) -> ReachingDefs:
        f = self._flows.get(id(scope))
        if f is None:
            f = self._flows[id(scope)] = ReachingDefs(scope, self.ix.kids)
        return f

    def defs(self, name: ast.Name) -> frozenset[Def]:
        """Reaching definitions of a read of ``name``; for a free name in a function,
        its module-level definitions."""
        scope = self.scope(name)
        flow = self.flow(scope)
        found = flow.defs(name)
        if found or scope is self.ix.tree or name.id in flow.bound:
            return found
        module = self.flow(self.ix.tree)
        return (module.final or {}).get(name.id, frozenset())

    # -- the entry point ----------------------------------------------------------
    def of(self, expr: ast.AST | None, depth: int = 0) -> Value:
        """What ``expr`` holds."""
        if expr is None or depth > MAX_DEPTH:
            return UNKNOWN
        key = id(expr)
        hit = self._memo.get(key)
        if hit is not None:
            return hit
        if key in self._busy:
            return UNKNOWN
        self._busy.add(key)
        try:
            v = self._of(expr, depth)
        finally:
            self._busy.discard(key)
        self._memo[key] = v
        return v

    def _of(self, expr: ast.AST, depth: int) -> Value:
        if isinstance(expr, ast.Name):
            return self._name(expr, depth)
        if isinstance(expr, ast.Call):
            return self._call(expr, depth)
        if isinstance(expr, ast.Attribute):
            return self._attribute(expr, depth)
        if isinstance(expr, ast.Subscript):
            base = self.of(expr.value, depth + 1)
            if base.members is not None:
                key = _constant(expr.slice)
                if isinstance(key, int) and key < 0:
                    key = -1 if key == -1 else None
                return base.member(key) if key is not None else UNKNOWN
            if base.is_module:
                return UNKNOWN
            return Value(head=base.head, origin=base.origin, labels=base.labels, tensor=base.tensor)  # keeps its kind
        if isinstance(expr, ast.IfExp):
            return join([self.of(expr.body, depth + 1), self.of(expr.orelse, depth + 1)])
        if isinstance(expr, ast.NamedExpr):
            return self.of(expr.value, depth + 1)
        return UNKNOWN

    def _def_value(self, d: Def, depth: int) -> Value:
        if d.kind == "assign":
            if d.index is None:
                return self.of(d.value, depth + 1)
            if isinstance(d.value, (ast.Tuple, ast.List)) and d.index < len(d.value.elts):
                return self.of(d.value.elts[d.index], depth + 1)
            return UNKNOWN
        if d.kind == "param":
            return self.param(d.node, depth + 1)
        return UNKNOWN

    def _name(self, name: ast.Name, depth: int) -> Value:
        defs = self.defs(name)
        if not defs:
            return UNKNOWN
        return join([self._def_value(d, depth) for d in sorted(defs, key=_def_pos)])

    # -- attributes -----------------------------------------------------------------
    def _attribute(self, expr: ast.Attribute, depth: int) -> Value:
        if isinstance(expr.value, ast.Name) and expr.value.id == "self":
            cls = self.ix.enclosing_class(expr)
            if cls is not None:
                return self.attrs(self.class_ref(cls)).get(expr.attr, UNKNOWN)
            return UNKNOWN
        base = self.of(expr.value, depth + 1)
        if base.cls is not None:
            return self._from(base.cls.ix, values_for(base.cls.ix).attrs(base.cls).get(expr.attr, UNKNOWN))
        return UNKNOWN

    def _from(self, src: FileIndex, v: Value) -> Value:
        """``v`` as seen from this file: an origin in another file gets its file name."""
        if src is self.ix or not v.origin or not v.origin.startswith("line ") or src.path is None:
            return v
        return replace(v, origin=f"{src.path.name}:{v.origin[5:]}")

    def class_ref(self, cls: ast.ClassDef) -> ClassRef:
        ref = self._classes.get(id(cls))
        if ref is None:
            ref = self._classes[id(cls)] = ClassRef(self.ix, cls)
        return ref

    def attrs(self, ref: ClassRef) -> dict[str, Value]:
        """``self.X`` facts from ``__init__`` (assignments, add_module/register_module),
        with the attributes of project base classes underneath."""
        if ref.ix is not self.ix:
            return values_for(ref.ix).attrs(ref)
        key = id(ref.node)
        if key in self._attrs:
            return self._attrs[key]
        self._attrs[key] = {}
        out: dict[str, Value] = {}
        for base in self.bases(ref):
            out.update(values_for(base.ix).attrs(base))
        found: dict[str, list[Value]] = {}
        init = _method(ref.node, "__init__")
        if init is not None:
            for n in self.ix.scope_nodes(init):
                if isinstance(n, (ast.Assign, ast.AnnAssign)) and n.value is not None:
                    targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                    for t in targets:
                        if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == "self":
                            found.setdefault(t.attr, []).append(self.of(n.value))
                elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) \
                        and n.func.attr in ("add_module", "register_module") and dotted(n.func.value) == "self" \
                        and len(n.args) == 2 and isinstance(n.args[0], ast.Constant) \
                        and isinstance(n.args[0].value, str):
                    found.setdefault(n.args[0].value, []).append(self.of(n.args[1]))
                elif isinstance(n, ast.Call) and dotted(n.func) == "setattr" and len(n.args) == 3 \
                        and dotted(n.args[0]) == "self" and isinstance(n.args[1], ast.Constant):
                    found.setdefault(str(n.args[1].value), []).append(self.of(n.args[2]))
        for attr, vals in found.items():
            out[attr] = join(vals)
        for attr in self._reassigned(ref.node):  # set again outside __init__: could be anything when called
            out.pop(attr, None)
        self._attrs[key] = out
        return out

    def _reassigned(self, cls: ast.ClassDef) -> set[str]:
        """Attributes ``self.X`` assigned in a method other than ``__init__``."""
        out = set()
        for item in cls.body:
            if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name != "__init__":
                for n in self.ix.scope_nodes(item):
                    if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                        for t in (n.targets if isinstance(n, ast.Assign) else [n.target]):
                            if isinstance(t, ast.Attribute) and dotted(t.value) == "self":
                                out.add(t.attr)
                    elif isinstance(n, ast.Call) and dotted(n.func) in ("setattr", "self.add_module",
                                                                        "self.register_module"):
                        return {t.attr for m in ast.walk(cls) if isinstance(m, ast.Assign) for t in m.targets
                                if isinstance(t, ast.Attribute) and dotted(t.value) == "self"} | {
                            str(a.args[0].value) for a in ast.walk(cls) if isinstance(a, ast.Call)
                            and a.args and isinstance(a.args[0], ast.Constant)}  # registered by name: all unknown
        return out

    def bases(self, ref: ClassRef) -> list[ClassRef]:
        out = []
        for b in ref.node.bases:
            found = self.resolve(b)
            if isinstance(found, ClassRef):
                out.append(found)
        return out

    # -- calls ------------------------------------------------------------------------
    def _call(self, call: ast.Call, depth: int) -> Value:
        ix = self.ix
        func = call.func
        if isinstance(func, ast.Attribute):
            attr = func.attr
            if attr in ACTIVATION_FUNCS and not _is_self_attr(func):
                q = ix.qualname(func) or ""
                recv = (dotted(func.value) or "").split(".")[0]
                if ix.is_torchish(q) or recv not in ix.imports:  # torch's op, or a tensor method
                    return Value(head=ACTIVATION_FUNCS[attr], origin=f"line {call.lineno}", tensor=True)
            if attr == "log" and call.args and (dotted(func) or "").rsplit(".", 1)[0] in ("torch", "math.torch"):
                inner = self.of(call.args[0], depth + 1)
                return Value(head="logprobs", origin=inner.origin) if inner.head == "probs" else UNKNOWN
            if attr == "log" and not call.args:
                inner = self.of(func.value, depth + 1)
                return Value(head="logprobs", origin=inner.origin) if inner.head == "probs" else UNKNOWN
            if attr in PASS_THROUGH and not _is_self_attr(func):
                inner = self.of(func.value, depth + 1)
                if attr in LABEL_CALLS:
                    return Value(labels=True, tensor=inner.tensor or attr == "long")
                return inner
            if attr in LABEL_CALLS:
                return Value(labels=True)
            if attr == "detach":
                inner = self.of(func.value, depth + 1)
                return Value(head=inner.head, origin=inner.origin, labels=inner.labels, tensor=True)
        q = ix.qualname(func) or ""
        last = q.rsplit(".", 1)[-1]
        if isinstance(func, ast.Name) and last in ACTIVATION_FUNCS and last not in ix.functions \
                and ix.is_torchish(q):
            return Value(head=ACTIVATION_FUNCS[last], origin=f"line {call.lineno}", tensor=True)
        if last == "argmax" and ix.is_torchish(q):
            return Value(labels=True)
        if q == "torch.compile" and call.args:
            return self.of(call.args[0], depth + 1)
        if q in ("torch.log",) and call.args:
            inner = self.of(call.args[0], depth + 1)
            return Value(head="logprobs", origin=inner.origin) if inner.head == "probs" else UNKNOWN
        if q.startswith("torch.") and q.count(".") == 1 and last in FACTORIES:
            dtype = (dotted(kwarg(call, "dtype")) or "").rsplit(".", 1)[-1]
            return Value(labels=last == "randint" or dtype in INT_DTYPES, tensor=True)
        # a torch layer or loss module being built
        if "." in q and ix.is_torchish(q) and last[:1].isupper() and ".nn." in f".{q}":
            if last.endswith("Loss"):
                return Value(loss_module=last)
            return self._layer(call, last, depth)
        # a loss computed by a known loss function / module
        kind = ix.is_loss_fn(call)
        if kind is not None and kind != "unknown":
            return Value(loss=kind)
        # a project class being built, or a project function being called
        target = self.resolve(func)
        if isinstance(target, ClassRef):
            return Value(cls=target)
        if isinstance(target, tuple):
            fix, fnode = target
            return self._from(fix, values_for(fix).returns(fnode, depth + 1))
        if isinstance(func, ast.Attribute) and _is_self_attr(func):  # self.helper(x): a method of this class
            cls = ix.enclosing_class(call)
            meth = _method(cls, func.attr) if cls is not None else None
            if meth is not None:
                return self.returns(meth, depth + 1)
        # calling a module value: a layer, a container, a project class instance, a loss module
        mod = self.of(func, depth + 1)
        if mod.loss_module is not None:
            return Value(loss=mod.loss_module)
        return self.apply(mod, call, depth)

    def _layer(self, call: ast.Call, last: str, depth: int) -> Value:
        if last in ("DataParallel", "DistributedDataParallel") and call.args:
            return self.of(call.args[0], depth + 1)  # the wrapper runs the wrapped module's forward
        members = None
        if last == "Sequential" and not any(isinstance(a, ast.Starred) for a in call.args) and call.args:
            vals = [self.of(a, depth + 1) for a in call.args]
            members = tuple([(i, v) for i, v in enumerate(vals)] + [(-1, vals[-1])])
        elif last == "ModuleList" and call.args and isinstance(call.args[0], (ast.List, ast.Tuple)) \
                and call.args[0].elts and not any(isinstance(e, ast.Starred) for e in call.args[0].elts):
            vals = [self.of(a, depth + 1) for a in call.args[0].elts]
            members = tuple([(i, v) for i, v in enumerate(vals)] + [(-1, vals[-1])])
        elif last == "ModuleDict" and call.args and isinstance(call.args[0], ast.Dict):
            d = call.args[0]
            if all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in d.keys):
                members = tuple((k.value, self.of(v, depth + 1)) for k, v in zip(d.keys, d.values))
        return Value(layer=last, members=members, origin=f"line {call.lineno}")

    def apply(self, mod: Value, call: ast.Call, depth: int) -> Value:
        """What calling the module ``mod`` returns."""
        if mod.layer is not None:
            if mod.layer in ACTIVATION_LAYERS:
                return Value(head=ACTIVATION_LAYERS[mod.layer], origin=mod.origin)
            if mod.layer in LINEAR_LAYERS:
                return Value(head="logits", origin=mod.origin)
            if mod.layer == "Sequential" and mod.members:
                return self.apply(mod.member(-1), call, depth + 1)
            return UNKNOWN
        if mod.cls is not None:
            return self._from(mod.cls.ix, values_for(mod.cls.ix).forward(mod.cls))
        return UNKNOWN

    # -- summaries --------------------------------------------------------------------
    def forward(self, ref: ClassRef) -> Value:
        """What ``ref``'s ``forward`` returns (every return agreeing), computed once."""
        if ref.ix is not self.ix:
            return values_for(ref.ix).forward(ref)
        key = id(ref.node)
        if key in self._forward:
            return self._forward[key]
        self._forward[key] = UNKNOWN  # recursion guard
        fwd = _method(ref.node, "forward")
        if fwd is None:
            bases = self.bases(ref)
            out = self._from(bases[0].ix, values_for(bases[0].ix).forward(bases[0])) if len(bases) == 1 else UNKNOWN
        else:
            out = self.returns(fwd, 0)
        out = Value(head=out.head, origin=out.origin, labels=out.labels)
        self._forward[key] = out
        return out

    def returns(self, func: FuncNode, depth: int) -> Value:
        """What ``func`` returns: the join over its ``return`` statements (unknown if none)."""
        key = id(func)
        if key in self._returns:
            return self._returns[key]
        self._returns[key] = UNKNOWN
        rets = [n for n in self.ix.scope_nodes(func) if isinstance(n, ast.Return)]
        if not rets or any(r.value is None for r in rets) or any(
                isinstance(n, (ast.Yield, ast.YieldFrom)) for n in self.ix.scope_nodes(func)):
            out = UNKNOWN
        else:
            out = join([self.of(r.value, depth + 1) for r in rets])
        self._returns[key] = out
        return out

    def param(self, arg: ast.arg, depth: int) -> Value:
        """A parameter: its annotation's class, else what every call site in this file passes."""
        func = self.ix.parents.get(self.ix.parents.get(arg))
        if arg.annotation is not None:
            ann = arg.annotation
            if isinstance(ann, ast.Constant) and isinstance(ann.value, str):
                try:
                    ann = ast.parse(ann.value, mode="eval").body
                except SyntaxError:
                    return UNKNOWN
            target = self.resolve(ann)
            return Value(cls=target) if isinstance(target, ClassRef) else UNKNOWN
        if not isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)) or depth > MAX_DEPTH // 2:
            return UNKNOWN
        a = func.args
        positional = [x.arg for x in a.posonlyargs + a.args]
        is_method = self.ix.enclosing_class(func) is not None and positional[:1] in (["self"], ["cls"])
        if is_method:
            positional = positional[1:]
            if arg.arg in ("self", "cls"):
                return UNKNOWN
        # a method is called as self.f(...); a function as f(...) (not obj.f(...): another object's method)
        sites = [c for c in self.ix.call_sites(func)
                 if (isinstance(c.func, ast.Attribute) and dotted(c.func.value) == "self") == is_method
                 and (is_method or isinstance(c.func, ast.Name))]
        if not sites:
            return UNKNOWN
        vals = []
        for site in sites:
            expr = kwarg(site, arg.arg)
            if expr is None and arg.arg in positional:
                i = positional.index(arg.arg)
                if any(isinstance(x, ast.Starred) for x in site.args[: i + 1]):
                    return UNKNOWN
                expr = site.args[i] if i < len(site.args) else None
            if expr is None:
                return UNKNOWN
            vals.append(self.of(expr, depth + 1))
        return join(vals)

    # -- resolution -------------------------------------------------------------------
    def resolve(self, node: ast.AST, hops: int = 0) -> "ClassRef | tuple[FileIndex, FuncNode] | None":
        """The project class (an ``nn.Module`` subclass) or function a name refers to."""
        text = dotted(node)
        if not text or hops > 3:
            return None
        return resolve_in(self.ix, text, hops)


def resolve_in(ix: FileIndex, text: str, hops: int = 0) -> "ClassRef | tuple[FileIndex, FuncNode] | None":
    """The project class (an ``nn.Module`` subclass) or function ``text`` names in ``ix``."""
    key = ("resolve", text)
    if key not in ix.cache:
        ix.cache[key] = _resolve(ix, text, hops)
    return ix.cache[key]


def _resolve(ix: FileIndex, text: str, hops: int) -> "ClassRef | tuple[FileIndex, FuncNode] | None":
    head, _, rest = text.partition(".")
    if not rest:
        if head in ix.module_classes:
            return values_for(ix).class_ref(ix.classes[head])
        if head in ix.classes:
            return None
        funcs = ix.functions.get(head, [])
        if len(funcs) == 1 and ix.enclosing_class(funcs[0]) is None:
            return ix, funcs[0]
    if head not in ix.imports or ix.project is None or hops > 3:
        return None
    module, level, symbol = ix.imports[head]
    project = ix.project
    if symbol is None:  # import pkg.models as m ; m.Net
        parts = rest.split(".")
        target = project.module(ix, ".".join([module or ""] + parts[:-1]).strip("."), 0)
        return resolve_in(target, parts[-1], hops + 1) if target is not None else None
    target = project.module(ix, module, level)
    if target is not None and not rest and (symbol in target.classes or symbol in target.functions
                                            or symbol in target.imports):
        return resolve_in(target, symbol, hops + 1)
    sub = project.module(ix, f"{module}.{symbol}" if module else symbol, level)  # from . import models
    if sub is not None and rest and "." not in rest:
        return resolve_in(sub, rest, hops + 1)
    return None


def _constant(node: ast.AST) -> object:
    """The value of a constant (``-1`` included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant) \
            and isinstance(node.operand.value, int):
        return -node.operand.value
    return node.value if isinstance(node, ast.Constant) else None


def _method(cls: ast.ClassDef, name: str) -> FuncNode | None:
    for item in cls.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return item
    return None


def _is_self_attr(func: ast.Attribute) -> bool:
    """``self.softmax(...)``: a call of an attribute of self (a module or a method), not torch's op."""
    return isinstance(func.value, ast.Name) and func.value.id == "self"


def _def_pos(d: Def) -> tuple[int, int]:
    return getattr(d.node, "lineno", 0), getattr(d.node, "col_offset", 0)
