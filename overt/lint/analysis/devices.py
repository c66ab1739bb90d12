"""Where a module's tensors live: a flow analysis of ``forward`` (and the methods it calls).

It answers one question for ``device-mismatch``: does a tensor that a torch factory made on the
CPU (``torch.zeros(n)`` without ``device=``) provably meet the model's tensors (its input, its
weights, what its layers return) while still on the CPU, or leave ``forward`` as its output?
The statements of ``forward`` are run abstractly, in order; each name holds one of:

- :data:`SCALAR`: a Python number, a 0-dim tensor, a shape or a dtype (mixes with any device);
- :class:`Cpu`: a tensor on the CPU, with the factory call that made it;
- :data:`DEV`: a tensor on the model's device (derived from the input or the weights);
- ``None``: unknown.

A value is followed through reassignment (``m = m.to(x.device)``), method and attribute chains
(``(torch.arange(n) * s).type_as(x).to(x)``), functions of torch, legacy ``Variable(...)``
wrappers, in-place changes (``idx += 1``, ``idx.add_(1)``), slice assignment (``buf[i] = y``
writes into ``buf`` and leaves it where it is) and the methods of the class that ``forward``
calls, with their arguments bound.  Branches are merged: a name that is moved on one path only
(``if use_cuda: h = h.cuda()``) is unknown after the ``if``, and an unknown value is never
reported.  A branch taken only while exporting to ONNX or tracing (``if torch.onnx.is_in_onnx_export():``)
is skipped: shape tensors live on the CPU by definition there.  So is the branch of
``if torch.cuda.is_available():`` taken without CUDA (where the model's tensors are on the CPU too), in a file
that names no other accelerator (``"mps"``, ``"xpu"``...).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from overt.lint.index import FileIndex, dotted, has_star_kwargs, kwarg, tokens

SCALAR = "scalar"
DEV = "dev"
MAYBE = "maybe"  # what a function of the project returns from the model's tensors: DEV if used as a tensor


@dataclass(frozen=True)
class Cpu:
    """A tensor on the CPU, made by the factory call ``origin``."""

    origin: ast.Call

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Cpu) and other.origin is self.origin

    def __hash__(self) -> int:
        return id(self.origin)


@dataclass(frozen=True)
class Seq:
    """A tuple or list of values (``(h, c)`` handed to an LSTM)."""

    items: tuple


@dataclass
class Meeting:
    """Where a CPU tensor met the model's tensors (or left forward)."""

    origin: ast.Call
    node: ast.AST
    how: str  # "combined" | "layer" | "handed" (with the model's tensors, to self.X) | "returned"
    what: str = ""


_FACTORIES = frozenset({"zeros", "ones", "empty", "full", "arange", "linspace", "logspace", "eye",
                        "rand", "randn", "randint", "randperm", "tensor", "as_tensor", "from_numpy"})
_LIKE = frozenset({"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like",
                   "randint_like"})
_METADATA = frozenset({"shape", "device", "dtype", "ndim", "is_cuda", "layout", "requires_grad", "is_leaf",
                       "grad_fn"})
_SAME = frozenset({"data", "T", "mT", "H", "real", "imag"})
_TO_PYTHON = frozenset({"item", "tolist", "numpy", "size", "dim", "numel", "nelement", "element_size", "stride",
                        "get_device", "data_ptr", "is_contiguous", "is_floating_point", "__len__"})
#: methods that combine the receiver with their tensor arguments element-wise (both must share a device)
_COMBINE = frozenset({"add", "add_", "sub", "sub_", "mul", "mul_", "div", "div_", "matmul", "mm", "bmm", "mv",
                      "masked_fill", "masked_fill_", "where", "pow", "pow_", "maximum", "minimum", "lt", "le",
                      "gt", "ge", "eq", "ne", "logical_and", "logical_or", "addcmul", "addcmul_", "addcdiv",
                      "addcdiv_", "lerp", "lerp_", "true_divide", "floor_divide", "remainder", "fmod",
                      "baddbmm", "addmm", "dot", "outer", "cross", "bitwise_and", "bitwise_or", "masked_select"})
#: torch functions that take an index argument (a CPU index may be legal, or not: left alone)
_INDEX_FUNCS = frozenset({"index_select", "gather", "take", "take_along_dim", "scatter", "scatter_add",
                          "index_add", "index_copy", "index_fill", "index_put", "embedding", "one_hot",
                          "bucketize", "searchsorted", "nonzero", "unique", "bincount"})
_SCALAR_BUILTINS = frozenset({"len", "int", "float", "bool", "range", "round", "abs", "math.sqrt", "math.log",
                              "math.ceil", "math.floor", "str", "isinstance", "hasattr", "getattr"})
_TENSOR_HINTS = frozenset({"shape", "device", "dtype", "size", "dim", "ndim", "view", "reshape", "permute",
                           "transpose", "unsqueeze", "squeeze", "contiguous", "float", "half", "flatten",
                           "expand", "masked_fill", "chunk", "split", "softmax", "sum", "mean", "numel",
                           "type_as", "new_zeros", "new_ones", "new_empty", "new_full", "new_tensor", "detach",
                           "mean", "max", "min", "abs", "exp", "log", "sigmoid", "tanh", "relu", "clamp", "norm",
                           "std", "var", "argmax", "argmin", "matmul", "bmm", "repeat", "narrow", "masked_fill_",
                           "sqrt", "pow", "cumsum", "flip", "roll", "topk", "sort", "argsort", "float", "long",
                           "bool", "int", "to", "cuda", "is_cuda", "requires_grad", "grad", "clone", "unbind"})
_TRACE_TESTS = ("is_in_onnx_export", "is_tracing", "is_scripting")
_OTHER_ACCELERATORS = frozenset({"mps", "xpu", "hpu", "npu", "mlu", "xla", "tpu", "privateuseone", "ipu"})
_DTYPE_WORDS = frozenset({"float", "float16", "float32", "float64", "half", "double", "bfloat16", "long", "int",
                          "int8", "int16", "int32", "int64", "uint8", "bool", "complex64", "complex128", "cfloat"})
_MAX_DEPTH = 3


def _leaves(v: object) -> list:
    if isinstance(v, Seq):
        return [x for item in v.items for x in _leaves(item)]
    return [v]


def _merge(a: object, b: object) -> object:
    if a == b:
        return a
    if isinstance(a, Cpu) and isinstance(b, Cpu):
        return a
    if isinstance(a, Seq) and isinstance(b, Seq) and len(a.items) == len(b.items):
        return Seq(tuple(_merge(x, y) for x, y in zip(a.items, b.items)))
    return None


def _merge_envs(a: dict | None, b: dict | None) -> dict | None:
    if a is None:
        return None if b is None else dict(b)
    if b is None:
        return dict(a)
    return {k: _merge(a[k], b[k]) for k in a.keys() & b.keys()} | {k: None for k in a.keys() ^ b.keys()}


def _ends(stmts: list[ast.stmt]) -> bool:
    """Does the block never fall through (ends in return/raise/continue/break)?"""
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise, ast.Continue, ast.Break))


class ClassDevices:
    """The flow analysis of one module class's ``forward``."""

    def __init__(self, ix: FileIndex, cls: ast.ClassDef):
        self.ix = ix
        self.cls = cls
        self.methods = {f.name: f for f in cls.body if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef))}
        self.modules, self.tensors = self._attributes()
        self.meetings: dict[int, Meeting] = {}
        self._depth = 0
        self._returns: list[list] = []
        self._hints: list[set[str]] = []  # per running function: the names it uses as tensors

    # -- what self.X is ------------------------------------------------------
    def _attributes(self) -> tuple[set[str], set[str]]:
        """``self.X`` that hold modules (layers) and tensors registered with the module (parameters,
        buffers), from every method of the class and its in-file bases."""
        ix, modules, tensors = self.ix, set(), set()
        classes, todo = [], [self.cls]
        while todo:
            c = todo.pop()
            if c in classes:
                continue
            classes.append(c)
            for b in c.bases:
                base = ix.classes.get((dotted(b) or "").rsplit(".", 1)[-1])
                if base is not None:
                    todo.append(base)
        for c in classes:
            for n in ast.walk(c):
                if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                        "register_buffer", "register_parameter") and n.args and isinstance(n.args[0], ast.Constant):
                    tensors.add(str(n.args[0].value))
                if not isinstance(n, (ast.Assign, ast.AnnAssign)) or not isinstance(n.value, ast.Call):
                    continue
                targets = n.targets if isinstance(n, ast.Assign) else [n.target]
                q = ix.qualname(n.value.func) or ""
                last = q.rsplit(".", 1)[-1]
                for t in targets:
                    if not (isinstance(t, ast.Attribute) and dotted(t.value) == "self"):
                        continue
                    if last == "Parameter":
                        tensors.add(t.attr)
                    elif last in ix.module_classes or (last[:1].isupper() and ix.is_torchish(q) and (
                            ".nn." in f".{q}" or q.startswith(("nn.", "torchvision.")))):
                        modules.add(t.attr)
        return modules, tensors

    def _self_attr(self, node: ast.AST) -> str | None:
        """``X`` of ``self.X`` (``self.X.weight``, ``self.X[i]`` included)."""
        cur = node
        while isinstance(cur, (ast.Attribute, ast.Subscript)):
            if isinstance(cur, ast.Attribute) and isinstance(cur.value, ast.Name) and cur.value.id == "self":
                return cur.attr
            cur = cur.value
        return None

    # -- running -------------------------------------------------------------
    def run_forward(self) -> list[Meeting]:
        forward = self.methods.get("forward")
        if forward is None or isinstance(forward, ast.AsyncFunctionDef):
            return []
        env = self._bind(forward, None)
        self._returns.append([])
        self._block(forward.body, env)
        self._hints.pop()
        for v, node in self._returns.pop():
            for leaf in _leaves(v):
                if isinstance(leaf, Cpu):
                    self._meet(leaf, node, "returned")
        return sorted(self.meetings.values(), key=lambda m: (m.origin.lineno, m.origin.col_offset))

    def _bind(self, func: ast.FunctionDef, args: list | None) -> dict:
        """The parameters of ``func``: bound to ``args`` (a call from forward), or, for forward itself,
        the model's device where the function uses them as tensors."""
        params = [a.arg for a in func.args.posonlyargs + func.args.args]
        if params and params[0] == "self":
            params = params[1:]
        hinted = self._hinted(func)
        self._hints.append(hinted)
        env: dict = {}
        for a in func.args.posonlyargs + func.args.args + func.args.kwonlyargs:
            ann = dotted(a.annotation) or ""
            env[a.arg] = DEV if a.arg in hinted or ann.rsplit(".", 1)[-1] == "Tensor" else None
        env.pop("self", None)
        if args is not None:  # a call from forward: what it passes decides, where it is known
            for p, v in zip(params, args):
                if v is not None:
                    env[p] = v
        return env

    def _hinted(self, func: ast.FunctionDef) -> set[str]:
        """Names ``func`` uses as tensors: ``x.shape``, ``x.view(...)``, ``x[:, 0]``, ``self.fc(x)``."""
        hinted = set()
        for n in ast.walk(func):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.attr in _TENSOR_HINTS:
                hinted.add(n.value.id)
            elif isinstance(n, ast.Call) and self._self_attr(n.func) in self.modules:
                hinted.update(a.id for a in n.args if isinstance(a, ast.Name))
            elif isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and (
                    isinstance(n.slice, ast.Slice) or (isinstance(n.slice, ast.Tuple) and any(
                        isinstance(e, (ast.Slice, ast.Constant)) and not isinstance(getattr(e, "value", 0), str)
                        for e in n.slice.elts))):
                hinted.add(n.value.id)  # x[:, 0], x[:n]: sliced like a tensor
        return hinted

    def _meet(self, cpu: Cpu, node: ast.AST, how: str, what: str = "") -> None:
        key = id(cpu.origin)
        if key not in self.meetings:
            self.meetings[key] = Meeting(cpu.origin, node, how, what)

    def _combine(self, values: list, node: ast.AST, what: str = "") -> object:
        """The value of an element-wise combination of ``values`` at ``node``; a CPU tensor meeting
        one on the model's device is recorded."""
        leaves = [x for v in values for x in _leaves(v)]
        cpus = [v for v in leaves if isinstance(v, Cpu)]
        if cpus and DEV in leaves:
            for c in cpus:
                self._meet(c, node, "combined", what)
            return DEV
        if DEV in leaves:
            return DEV
        if cpus:
            return cpus[0]
        if leaves and all(v == SCALAR for v in leaves):
            return SCALAR
        return None

    def _block(self, stmts: list[ast.stmt], env: dict | None) -> dict | None:
        for s in stmts:
            if env is None:
                return None
            env = self._stmt(s, env)
        return env

    def _stmt(self, s: ast.stmt, env: dict) -> dict | None:
        if isinstance(s, (ast.Assign, ast.AnnAssign)):
            if s.value is None:
                return env
            v = self._ev(s.value, env)
            for t in (s.targets if isinstance(s, ast.Assign) else [s.target]):
                self._assign(t, v, env)
            return env
        if isinstance(s, ast.AugAssign):
            r = self._ev(s.value, env)
            if isinstance(s.target, ast.Name):
                env[s.target.id] = self._combine([env.get(s.target.id), r], s)
            else:
                self._ev(s.target, env)
            return env
        if isinstance(s, ast.Expr):
            self._ev(s.value, env)
            return env
        if isinstance(s, ast.Return):
            v = self._ev(s.value, env) if s.value is not None else None
            if self._returns:
                self._returns[-1].append((v, s))
            return None
        if isinstance(s, (ast.Raise, ast.Continue, ast.Break)):
            return None
        if isinstance(s, ast.If):
            if self._tracing_only(s.test):
                return self._block(s.orelse, dict(env))
            cuda = self._cuda_test(s.test)
            if cuda is not None:  # the branch taken without CUDA holds no GPU tensor to meet: skipped
                return self._block(s.body if cuda else s.orelse, dict(env))
            self._ev(s.test, env)
            a = self._block(s.body, dict(env))
            b = self._block(s.orelse, dict(env))
            return _merge_envs(a, b)
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While)):
            if isinstance(s, ast.While):
                self._ev(s.test, env)
                item = None
            else:
                it = self._ev(s.iter, env)
                item = it if isinstance(it, Cpu) else SCALAR if self._is_range(s.iter) else None
                if isinstance(it, Seq):
                    item = it.items[0] if it.items else None
                    for x in it.items[1:]:
                        item = _merge(item, x)
            cur = env
            for _ in range(2):  # a value carried from one iteration to the next
                inner = dict(cur)
                if not isinstance(s, ast.While):
                    self._assign(s.target, item, inner)
                out = self._block(s.body, inner)
                cur = _merge_envs(cur, out) if out is not None else cur
            return self._block(s.orelse, cur)
        if isinstance(s, (ast.With, ast.AsyncWith)):
            for item in s.items:
                self._ev(item.context_expr, env)
                if item.optional_vars is not None:
                    self._assign(item.optional_vars, None, env)
            return self._block(s.body, env)
        if isinstance(s, ast.Try):
            out = self._block(s.body, dict(env))
            for h in s.handlers:
                out = _merge_envs(out, self._block(h.body, dict(env)))
            out = self._block(s.orelse, out) if out is not None else None
            return self._block(s.finalbody, out) if s.finalbody and out is not None else out
        if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            env[s.name] = None
            return env
        for child in ast.iter_child_nodes(s):
            if isinstance(child, ast.expr):
                self._ev(child, env)
        return env

    def _is_range(self, expr: ast.AST) -> bool:
        return isinstance(expr, ast.Call) and dotted(expr.func) in ("range", "enumerate", "zip")

    def _cuda_test(self, test: ast.AST) -> bool | None:
        """``if torch.cuda.is_available():`` -> True, ``if not torch.cuda.is_available():`` -> False: which
        branch runs where CUDA exists.  The other runs only on a machine without CUDA, where the model's tensors
        are on the CPU too, unless the file uses another accelerator (``"mps"``, ``"xpu"``): None there, and
        for any other test."""
        negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
        call = test.operand if negated else test
        if not (isinstance(call, ast.Call) and not call.args and not call.keywords
                and self.ix.qualname(call.func) == "torch.cuda.is_available") or self._other_accelerator():
            return None
        return not negated

    def _other_accelerator(self) -> bool:
        """The file names an accelerator other than CUDA (``"mps"``, ``torch.backends.mps``, ``"xpu"``...)."""
        key = ("other-accelerator",)
        if key not in self.ix.cache:
            self.ix.cache[key] = any(
                (n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) else
                 n.attr if isinstance(n, ast.Attribute) else "").split(":", 1)[0].lower() in _OTHER_ACCELERATORS
                for n in ast.walk(self.ix.tree))
        return self.ix.cache[key]

    def _tracing_only(self, test: ast.AST) -> bool:
        """``if torch.onnx.is_in_onnx_export():``, ``torch.jit.is_tracing()``, ``if self.onnx_trace:``: a branch
        for export, where shape tensors live on the CPU by definition."""
        if isinstance(test, ast.Call):
            return (dotted(test.func) or "").endswith(_TRACE_TESTS)
        return bool(set(tokens(dotted(test) or "")) & {"onnx", "tracing", "trace", "export", "exporting"})

    def _assign(self, target: ast.AST, v: object, env: dict) -> None:
        if v == MAYBE:
            if isinstance(target, (ast.Tuple, ast.List)):
                for t in target.elts:
                    self._assign(t, MAYBE, env)
                return
            v = DEV if isinstance(target, ast.Name) and self._hints and target.id in self._hints[-1] else None
        if isinstance(target, ast.Name):
            env[target.id] = v
        elif isinstance(target, (ast.Tuple, ast.List)):
            elts = target.elts
            if isinstance(v, Seq) and len(v.items) == len(elts):
                for t, x in zip(elts, v.items):
                    self._assign(t, x, env)
            else:
                for t in elts:  # a layer's tuple output is on the model's device, element by element
                    self._assign(t, DEV if v == DEV else None, env)
        elif isinstance(target, ast.Starred):
            self._assign(target.value, None, env)
        else:  # `buf[i] = y`, `self.x = y`: a write into storage, which stays where it is
            self._ev(target, env)

    # -- expressions ---------------------------------------------------------
    def _ev(self, e: ast.AST | None, env: dict) -> object:
        if e is None:
            return None
        if isinstance(e, ast.Constant):
            return SCALAR
        if isinstance(e, ast.JoinedStr):
            return SCALAR
        if isinstance(e, ast.Name):
            return env.get(e.id)
        if isinstance(e, ast.Attribute):
            if isinstance(e.value, ast.Name) and e.value.id == "self":
                return DEV if e.attr in self.tensors or e.attr in self.modules else None
            base = self._ev(e.value, env)
            if e.attr in _METADATA:
                return SCALAR
            if e.attr in _SAME:
                return base
            return DEV if base == DEV and self._self_attr(e) in self.modules else None
        if isinstance(e, ast.Subscript):
            base = self._ev(e.value, env)
            self._ev(e.slice, env)
            if isinstance(base, Seq):
                idx = e.slice.value if isinstance(e.slice, ast.Constant) else None
                if isinstance(idx, int) and -len(base.items) <= idx < len(base.items):
                    return base.items[idx]
                return None
            return base if isinstance(base, Cpu) or base in (DEV, SCALAR) else None
        if isinstance(e, (ast.Tuple, ast.List)):
            return Seq(tuple(self._ev(x, env) for x in e.elts))
        if isinstance(e, ast.Slice):
            for part in (e.lower, e.upper, e.step):
                self._ev(part, env)
            return None
        if isinstance(e, ast.BinOp):
            return self._combine([self._ev(e.left, env), self._ev(e.right, env)], e)
        if isinstance(e, ast.UnaryOp):
            return self._ev(e.operand, env)
        if isinstance(e, ast.Compare):
            return self._combine([self._ev(e.left, env)] + [self._ev(c, env) for c in e.comparators], e)
        if isinstance(e, ast.BoolOp):
            for v in e.values:
                self._ev(v, env)
            return None
        if isinstance(e, ast.IfExp):
            if self._tracing_only(e.test):
                return self._ev(e.orelse, env)
            self._ev(e.test, env)
            return _merge(self._ev(e.body, env), self._ev(e.orelse, env))
        if isinstance(e, ast.Call):
            return self._call(e, env)
        if isinstance(e, ast.NamedExpr):
            v = self._ev(e.value, env)
            self._assign(e.target, v, env)
            return v
        if isinstance(e, ast.Starred):
            return self._ev(e.value, env)
        return None  # comprehensions, lambdas, dicts: not followed

    def _args(self, call: ast.Call, env: dict) -> list:
        return [self._ev(a, env) for a in call.args] + [self._ev(k.value, env) for k in call.keywords]

    def _call(self, call: ast.Call, env: dict) -> object:
        ix, func = self.ix, call.func
        q = ix.qualname(func) or ""
        last = q.rsplit(".", 1)[-1]
        if isinstance(func, ast.Subscript) and self._self_attr(func) in self.modules:
            return self._layer(call, self._args(call, env), self._self_attr(func))  # self.blocks[i](x)
        head = (dotted(func) or "").split(".")[0]
        if isinstance(func, ast.Attribute) and (not head or head in env or head == "self" or (
                head not in ix.aliases and head not in ("torch", "F", "nn", "math"))):
            return self._method(call, func, env)
        args = self._args(call, env)
        if q.startswith("torch.") and q.count(".") == 1 and last in _FACTORIES:
            return self._factory(call, last)
        if last == "Variable" or last == "Parameter":
            return args[0] if call.args else None
        if last in _LIKE:
            return args[0] if args else None
        if q in _SCALAR_BUILTINS:
            return SCALAR
        if ix.is_torchish(q) and "." in q and (q.startswith("torch.") or q.split(".")[0] in ("F", "nn")):
            if last in _INDEX_FUNCS or last.startswith("is_"):
                return DEV if DEV in [x for a in args for x in _leaves(a)] else None
            if any(leaf is None for a in args[:len(call.args)] for leaf in _leaves(a)):
                return None  # torch.onnx.operators.reshape_from_tensor_shape(x, shape): not known what it makes
            return self._combine(args, call, f"torch.{last}(...)" if q.startswith("torch.") else f"{q}(...)")
        if DEV in [x for a in args for x in _leaves(a)] and not any(isinstance(x, Cpu) for a in args
                                                                    for x in _leaves(a)):
            return MAYBE
        return None

    def _factory(self, call: ast.Call, last: str) -> object:
        device = kwarg(call, "device")
        if device is not None or has_star_kwargs(call):
            return None  # a device written out: the author's decision
        literal = call.args and isinstance(call.args[0], (ast.List, ast.Tuple, ast.ListComp))
        if last in ("tensor", "as_tensor") and not literal:
            return SCALAR  # 0-dim CPU tensors mix freely with tensors on any device
        return Cpu(call)

    def _method(self, call: ast.Call, func: ast.Attribute, env: dict) -> object:
        name = func.attr
        recv = func.value
        if isinstance(recv, ast.Name) and recv.id == "self":
            args = self._args(call, env)
            helper = self.methods.get(name)
            if helper is not None and isinstance(helper, ast.FunctionDef):
                return self._helper(helper, call, env)
            if name in self.modules:
                return self._layer(call, args, name)
            leaves = [x for a in args for x in _leaves(a)]
            if DEV in leaves and any(isinstance(x, Cpu) for x in leaves):
                return self._layer(call, args, name, "handed")  # self.model(feats, cpu_mask): handed over together
            return MAYBE if DEV in leaves else None
        if self._self_attr(recv) in self.modules:  # self.encoder.forward_features(x): the module's own method
            self._args(call, env)
            return SCALAR if name in _TO_PYTHON else DEV
        rv = self._ev(recv, env)
        args = self._args(call, env)
        if name in ("to", "cuda", "to_device", "type_as"):
            if name == "to" and self._dtype_only(call):
                return rv
            if name == "type_as" and args and isinstance(args[0], Cpu):
                return rv
            return DEV if rv is not None or name != "to" else None
        if name == "cpu":
            return None  # moved to the CPU on purpose
        if name in _TO_PYTHON:
            return SCALAR
        if isinstance(rv, Cpu) or rv == DEV:
            if name in _COMBINE:
                return self._combine([rv] + args, call, f".{name}(...)")
            if name.startswith("new_") or name in ("expand_as", "view_as", "reshape_as", "clone", "detach"):
                return rv
            return rv
        return None

    def _dtype_only(self, call: ast.Call) -> bool:
        """``.to(torch.float16)``, ``.to(x.dtype)``, ``.to(dtype=...)``: a cast, which stays where it is."""
        if kwarg(call, "device") is not None:
            return False
        if not call.args:
            return kwarg(call, "dtype") is not None
        a = dotted(call.args[0]) or ""
        return a.endswith(".dtype") or (a.startswith("torch.") and a.rsplit(".", 1)[-1] in _DTYPE_WORDS)

    def _layer(self, call: ast.Call, args: list, attr: str, how: str = "layer") -> object:
        for a in args:
            for leaf in _leaves(a):
                if isinstance(leaf, Cpu):
                    self._meet(leaf, call, how, f"self.{attr}")
        return DEV

    def _helper(self, helper: ast.FunctionDef, call: ast.Call, env: dict) -> object:
        """Run a method of the class called from forward, its parameters bound to the call's arguments."""
        if self._depth >= _MAX_DEPTH or any(isinstance(a, ast.Starred) for a in call.args):
            return None
        args = [self._ev(a, env) for a in call.args]
        inner = self._bind(helper, args)
        given = {k.arg for k in call.keywords}
        for k in call.keywords:
            if k.arg is not None:
                inner[k.arg] = self._ev(k.value, env)
        positional = [a.arg for a in helper.args.posonlyargs + helper.args.args][1:]
        defaults = helper.args.defaults
        for p, d in zip(positional[len(positional) - len(defaults):], defaults):
            if p not in given and positional.index(p) >= len(args) and isinstance(d, ast.Constant):
                inner[p] = SCALAR  # left at its constant default
        self._depth += 1
        self._returns.append([])
        try:
            self._block(helper.body, inner)
            returns = self._returns[-1]
        finally:
            self._returns.pop()
            self._hints.pop()
            self._depth -= 1
        if not returns:
            return None
        out = returns[0][0]
        for r, _ in returns[1:]:
            out = _merge(out, r)
        return out


def device_meetings(ix: FileIndex, cls: ast.ClassDef) -> list[Meeting]:
    """Each CPU factory tensor of ``cls.forward`` (and the methods it calls) that provably meets the
    model's tensors or is returned as its output, with where."""
    return ClassDevices(ix, cls).run_forward()
