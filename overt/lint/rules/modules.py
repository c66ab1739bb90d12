"""Rules about nn.Module definitions (OVT4xx: registration and construction)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.stateless import only_stateless

_CONTAINERS = (ast.List, ast.Tuple, ast.Dict, ast.ListComp, ast.DictComp, ast.Set)


def _builds_module(ix: FileIndex, node: ast.AST) -> bool:
    """Is ``node`` a call that constructs a Module or a Parameter?"""
    if not isinstance(node, ast.Call):
        return False
    q = ix.qualname(node.func) or ""
    last = q.rsplit(".", 1)[-1]
    if last in ix.module_classes or last == "Parameter":
        return True
    return ix.is_torchish(q) and (".nn." in f".{q}" or q.startswith("nn.")) and last[:1].isupper() \
        and not last.endswith("Loss") and last not in ("ModuleList", "ModuleDict", "ParameterList", "ParameterDict")


def _self_attr(target: ast.AST) -> str | None:
    if isinstance(target, ast.Attribute) and isinstance(target.value, ast.Name) and target.value.id == "self":
        return target.attr
    return None


@rule("unregistered-submodule")
def unregistered_submodule(ix: FileIndex) -> Iterator[Hit]:
    for name in ix.module_classes:
        cls = ix.classes[name]
        nodes = list(ast.walk(cls))
        if any(isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
               and n.func.attr in ("add_module", "register_module", "register_parameter") for n in nodes):
            continue
        registered: set[str] = set()
        plain: dict[str, ast.Assign] = {}
        appended: dict[str, ast.AST] = {}
        for n in nodes:
            if isinstance(n, ast.Assign):
                for t in n.targets:
                    attr = _self_attr(t)
                    if attr is None:
                        continue
                    if isinstance(n.value, _CONTAINERS):
                        if any(_builds_module(ix, x) for x in ast.walk(n.value)):
                            plain.setdefault(attr, n)
                        elif isinstance(n.value, (ast.List, ast.Dict)) and not (
                                n.value.elts if isinstance(n.value, ast.List) else n.value.keys):
                            plain.setdefault(attr, n)  # empty; filled by append below
                    else:
                        registered.add(attr)
            elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in (
                    "append", "extend", "insert", "__setitem__") and n.args:
                attr = _self_attr(n.func.value)
                if attr and any(_builds_module(ix, x) for x in ast.walk(n.args[-1])):
                    appended.setdefault(attr, n)
        for n in nodes:  # self.layers[k] = nn.Linear(...)
            if isinstance(n, ast.Assign) and _builds_module(ix, n.value):
                for t in n.targets:
                    if isinstance(t, ast.Subscript) and _self_attr(t.value):
                        appended.setdefault(_self_attr(t.value), n)
        wrapped = set()
        for n in nodes:  # self.net = nn.Sequential(*self.layers): the layers are registered there
            if isinstance(n, ast.Assign) and isinstance(n.value, ast.Call) and any(_self_attr(t) for t in n.targets):
                wrapped.update(_self_attr(x) for x in ast.walk(n.value) if _self_attr(x))
        for attr, node in plain.items():
            if attr in registered or attr in wrapped:
                continue
            value = node.value
            filled = any(_builds_module(ix, x) for x in ast.walk(value)) or attr in appended
            if not filled or _holds_only_stateless(ix, nodes, attr, value):
                continue
            kind = "dict" if isinstance(value, (ast.Dict, ast.DictComp)) else "list"
            fix = "nn.ModuleDict" if kind == "dict" else "nn.ModuleList (nn.ParameterList for parameters)"
            yield Hit("unregistered-submodule", node,
                      f"self.{attr} keeps layers in a plain Python {kind}, so {name} does not register them: "
                      f"their parameters are invisible to the optimizer, .to(), state_dict() and checkpoints", fix=f""
                      f"wrap it in {fix}")


def _holds_only_stateless(ix: FileIndex, nodes: list[ast.AST], attr: str, value: ast.AST) -> bool:
    """Everything put in ``self.<attr>`` (its literal, each append/extend/insert, each ``self.<attr>[k] = ...``)
    is a module with no parameters, buffers or train/eval behaviour: a plain list of them loses nothing."""
    if not only_stateless(ix, value):
        return False
    for n in nodes:
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and _self_attr(n.func.value) == attr \
                and n.func.attr in ("append", "extend", "insert", "__setitem__", "update", "setdefault"):
            if not n.args or not only_stateless(ix, n.args[-1]):
                return False
        elif isinstance(n, (ast.Assign, ast.AugAssign)):
            targets = n.targets if isinstance(n, ast.Assign) else [n.target]
            if any(isinstance(t, ast.Subscript) and _self_attr(t.value) == attr for t in targets) \
                    and not only_stateless(ix, n.value):
                return False
            if isinstance(n, ast.AugAssign) and _self_attr(n.target) == attr and not only_stateless(ix, n.value):
                return False
    return True


def _is_super_init(ix: FileIndex, node: ast.AST) -> bool:
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "__init__"):
        return False
    v = node.func.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
        return True
    return dotted(v) is not None and dotted(v) != "self"


def _delegates_init(node: ast.AST) -> bool:
    """``super().anything(...)`` or a call of an ``*init*`` helper: the base class's
    initialisation may happen there, so stay quiet."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
        return False
    v = node.func.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name) and v.func.id == "super":
        return True
    return "init" in node.func.attr.lower() and node.func.attr != "__init__"


def _module_inits(ix: FileIndex) -> Iterator[tuple[str, ast.ClassDef, ast.FunctionDef]]:
    """Each nn.Module class of the file that defines ``__init__``: (name, class, its __init__)."""
    for name in ix.module_classes:
        cls = ix.classes[name]
        init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
        if init is not None:
            yield name, cls, init


@rule("missing-super-init")
def missing_super_init(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return  # test doubles that never build layers
    for name, _, init in _module_inits(ix):
        first_super = None
        first_assign = None
        for n in ast.walk(init):
            if _is_super_init(ix, n) and (first_super is None or n.lineno < first_super.lineno):
                first_super = n
            if isinstance(n, ast.Assign) and any(_self_attr(t) for t in n.targets) and (
                    _builds_module(ix, n.value)) and (first_assign is None or n.lineno < first_assign.lineno):
                first_assign = n
        if first_super is None and any(_delegates_init(n) for n in ast.walk(init)):
            continue
        if first_super is None:
            yield Hit("missing-super-init", init,
                      f"{name}.__init__ never calls super().__init__(), so nn.Module's bookkeeping is never "
                      f"set up and assigning a layer fails with an AttributeError that does not say why", fix="call "
                      "super().__init__() first")
        elif first_assign is not None and first_assign.lineno < first_super.lineno:
            yield Hit("missing-super-init", first_assign,
                      f"{name}.__init__ assigns a layer before super().__init__() runs, which fails with "
                      f"'cannot assign module before Module.__init__() call'", fix="call super().__init__() first")


#: torch functions that make a new tensor
_TENSOR_FACTORIES = frozenset({"tensor", "as_tensor", "from_numpy", "zeros", "ones", "full", "empty", "arange",
                               "linspace", "logspace", "eye", "rand", "randn", "randint", "randperm",
                               "zeros_like", "ones_like", "full_like", "empty_like", "rand_like", "randn_like"})


#: tensor methods that return a tensor again
_TENSOR_METHODS = frozenset({"float", "double", "half", "bfloat16", "long", "int", "bool", "to", "cuda", "cpu",
                             "clone", "detach", "contiguous", "view", "reshape", "unsqueeze", "squeeze", "t"})


def _makes_tensor(ix: FileIndex, node: ast.AST) -> bool:
    """``torch.zeros(...)`` and the like, possibly with ``.float()``/``.to(...)``/arithmetic after it."""
    while isinstance(node, ast.BinOp):
        node = node.left
    while (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _TENSOR_METHODS
           and isinstance(node.func.value, ast.Call)):
        node = node.func.value  # torch.ones(3).float() -> torch.ones(3)
    if not isinstance(node, ast.Call):
        return False
    q = ix.qualname(node.func) or ""
    return ix.is_torchish(q) and q.rsplit(".", 1)[-1] in _TENSOR_FACTORIES and ".nn." not in f".{q}"


def _scalar_tensor(value: ast.expr) -> bool:
    """``torch.tensor(3.0)`` / ``torch.tensor(cfg.WEIGHT, dtype=...)``: one number, a 0-dim tensor that
    mixes with tensors on any device."""
    if not (isinstance(value, ast.Call) and (dotted(value.func) or "").rsplit(".", 1)[-1] in ("tensor", "as_tensor")
            and value.args):
        return False
    arg = value.args[0]
    if isinstance(arg, ast.UnaryOp):
        arg = arg.operand
    return (isinstance(arg, ast.Constant) and isinstance(arg.value, (int, float))) or (
        isinstance(arg, ast.Attribute) and arg.attr.isupper())  # a config constant: cfg.MODEL.LOSS_WEIGHT


#: methods that give the same values in another view or dtype, on the tensor's own device: a read followed by a
#: chain of them and then a move is still moved before it meets anything
_SAME_DEVICE_VIEWS = frozenset({"view", "view_as", "reshape", "reshape_as", "long", "float", "double", "int", "half",
                                "bool", "squeeze", "unsqueeze", "flatten", "t", "transpose", "contiguous", "clone",
                                "detach"})


def _moved_on_the_spot(read: ast.AST, parents: dict) -> bool:
    """Is ``read`` (an ``x.attr`` load) moved in the same expression before it is used: ``x.attr.to(...)``,
    ``x.attr[i].view_as(t).to(device)``, ``.type_as(...)``, ``.cuda()``, through indexing and same-device views?"""
    node = read
    while True:
        up = parents.get(node)
        if isinstance(up, ast.Subscript) and up.value is node:
            node = up
            continue
        if isinstance(up, ast.Attribute) and up.value is node:
            if up.attr in ("to", "type_as", "cuda"):
                return True
            call = parents.get(up)
            if up.attr in _SAME_DEVICE_VIEWS and isinstance(call, ast.Call) and call.func is up:
                node = call
                continue
        return False


def _moved_where_used(cls: ast.ClassDef, attr: str, ix: FileIndex | None = None) -> bool:
    """Every read of ``self.attr`` outside __init__ is moved on the spot (``self.z.type_as(x)``, ``.to(x.device)``),
    and so is every read of ``.attr`` through another name in the file (``model.table[y].view_as(y).to(device)``
    in a loss function beside the class): whatever device the module is on, the tensor meets others only after
    it was moved."""
    reads = []
    parents = {c: n for n in ast.walk(cls) for c in ast.iter_child_nodes(n)}
    for n in ast.walk(cls):
        if isinstance(n, ast.Attribute) and n.attr == attr and isinstance(n.value, ast.Name) \
                and n.value.id == "self" and isinstance(n.ctx, ast.Load):
            reads.append(n)
    if reads and all(isinstance(parents.get(r), ast.Attribute) and parents[r].attr in ("to", "type_as", "cuda")
                     for r in reads):
        return True  # the class's own reads, each moved at once
    if ix is not None:
        inside = {id(n) for n in ast.walk(cls)}
        outside = [n for n in ast.walk(ix.tree) if isinstance(n, ast.Attribute) and n.attr == attr
                   and isinstance(n.ctx, ast.Load) and id(n) not in inside]
        if outside:
            if any(isinstance(n, ast.Constant) and n.value == attr for n in ast.walk(ix.tree)):
                return False  # getattr(obj, "attr"): read in a way not followed here
            parents.update({c: n for n in ast.walk(ix.tree) for c in ast.iter_child_nodes(n)})
            reads.extend(outside)
    if not reads:
        return False
    return all(_moved_on_the_spot(r, parents) for r in reads)


#: factories whose values follow from the shape (and a constant fill) alone: built again identically by the next
#: construction, so no checkpoint needs to hold them
_SHAPE_ONLY = frozenset({"zeros", "ones", "full", "eye", "arange", "linspace", "logspace"})


def _shape_only(ix: FileIndex, init: ast.FunctionDef, value: ast.expr, attr: str) -> bool:
    """Is ``self.attr = value`` a shape-only constant (``torch.eye(n)``, ``torch.zeros(3, 4)``, nothing random,
    nothing read from data, not filled in afterwards): a value every construction builds again, so no checkpoint
    needs to hold it?"""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _TENSOR_METHODS \
            and isinstance(value.func.value, ast.Call):
        value = value.func.value
    if not isinstance(value, ast.Call):
        return False
    q = ix.qualname(value.func) or ""
    if q.rsplit(".", 1)[-1] not in _SHAPE_ONLY:
        return False
    for n in ast.walk(init):  # filled in afterwards (``self.m[i] = ...``, ``self.m.uniform_()``): no longer shape-only
        if isinstance(n, ast.Subscript) and isinstance(n.ctx, ast.Store) and _self_attr(n.value) == attr:
            return False
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr.endswith("_") \
                and _self_attr(n.func.value) == attr:
            return False
    return True


def _host_built(ix: FileIndex, fn: ast.AST, name: str) -> bool:
    """Is every binding of the local ``name`` in ``fn`` a torch factory or ``torch.tensor(...)`` call given no
    ``device`` (a tensor built on the host, whatever device the model is on; a ``*_like`` factory follows its
    argument's device: not this)?"""
    bound = [n for n in ast.walk(fn) if isinstance(n, ast.Name) and n.id == name and not isinstance(n.ctx, ast.Load)]
    assigns = [n for n in ast.walk(fn) if isinstance(n, ast.Assign) and len(n.targets) == 1
               and isinstance(n.targets[0], ast.Name) and n.targets[0].id == name]
    if not assigns or len(assigns) != len(bound):
        return False  # a loop variable, an argument, a tuple unpacking: not known here
    for a in assigns:
        v = a.value
        if not isinstance(v, ast.Call) or any(k.arg == "device" for k in v.keywords):
            return False
        q = ix.qualname(v.func) or ""
        fn_name = q.rsplit(".", 1)[-1]
        if not (ix.is_torchish(q) and fn_name in _TENSOR_FACTORIES and not fn_name.endswith("_like")):
            return False
    return True


def _meets_only_host_tensors(ix: FileIndex, cls: ast.ClassDef, init: ast.FunctionDef, attr: str) -> bool:
    """Is every read of ``self.attr`` outside ``__init__`` inside an assignment whose other tensors (targets and
    operands) are locals its function built on the host (``preds = torch.zeros(n, k)``; ``preds[i] =
    self.eye[idx]``)?  Then the attribute is on the device it is used on, and a buffer that ``.to(device)``
    moved would break that line: the device half of the finding does not hold.  Any other name, attribute of
    ``self`` or call in the statement (a parameter, the batch, a module) is not known to be on the host."""
    parents = {c: n for n in ast.walk(cls) for c in ast.iter_child_nodes(n)}
    in_init = {id(n) for n in ast.walk(init)}
    reads = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == attr
             and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
             and id(n) not in in_init]
    if not reads:
        return False
    for r in reads:
        up = parents.get(r)
        if (isinstance(up, ast.Attribute) and up.attr in ("shape", "ndim", "dtype")) or (
                isinstance(up, ast.Attribute) and up.attr in _PYTHON_SIDE and isinstance(parents.get(up), ast.Call)) or (
                isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id == "len"):
            continue  # its shape or size: a Python value, on no device
        stmt, fn = r, None
        while stmt is not None and not isinstance(stmt, ast.stmt):
            stmt = parents.get(stmt)
        fn = stmt
        while fn is not None and not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            fn = parents.get(fn)
        if not isinstance(stmt, ast.Assign) or fn is None:
            return False
        for n in ast.walk(stmt):
            if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "self" \
                    and n is not r:
                return False
            if isinstance(n, ast.Call):
                return False
            if isinstance(n, ast.Name) and n.id != "self" and not _host_built(ix, fn, n.id):
                return False
    return True


def _resynced_constant(ix: FileIndex, cls: ast.ClassDef, init: ast.FunctionDef, value: ast.expr, attr: str) -> bool:
    """Is ``self.attr`` a shape-only constant (:func:`_shape_only`) that a method outside ``__init__`` moves
    itself, ``self.attr = self.attr.to(...)`` (the flow layers' "if my constants are not on my parameters'
    device, move them" at the top of forward)?  Then where ``.to(device)`` leaves it is corrected where it is
    used, and a checkpoint need not hold a value every construction rebuilds: neither half of the finding
    holds.  A random or data-built tensor stays reported: its values are lost with the checkpoint however it is
    moved."""
    if not _shape_only(ix, init, value, attr):
        return False
    in_init = {id(n) for n in ast.walk(init)}
    for n in ast.walk(cls):
        if not isinstance(n, ast.Assign) or id(n) in in_init or not any(_self_attr(t) == attr for t in n.targets):
            continue
        v = n.value
        if (isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr in ("to", "type_as", "cuda")
                and isinstance(v.func.value, ast.Attribute) and _self_attr(v.func.value) == attr):
            return True
    return False


def _used_only_in_init(ix: FileIndex, init: ast.AST, attr: str) -> bool:
    """Is ``.attr`` read nowhere in the file outside ``__init__`` (read there only to build something else,
    or never read at all: an attribute left over, replaced by a local)?  Then no code uses the tensor after
    construction, so where ``.to(device)`` leaves it and whether a checkpoint holds it change nothing.  An
    augmented assignment (``self.total += x``) reads it."""
    inside = {id(n) for n in ast.walk(init)}
    augmented = {id(n.target) for n in ast.walk(ix.tree) if isinstance(n, ast.AugAssign)}
    reads = [a for a in ix.attributes if a.attr == attr and (isinstance(a.ctx, ast.Load) or id(a) in augmented)]
    if any(isinstance(n, ast.Constant) and n.value == attr for n in ast.walk(ix.tree)):
        return False  # getattr(self, "attr"), a name in a list of attributes: read in a way not followed here
    return all(id(a) in inside for a in reads)


def _only_updates_itself(ix: FileIndex, cls: ast.ClassDef, init: ast.AST, attr: str) -> bool:
    """Is every read of ``self.attr`` outside ``__init__`` part of an update of one of its elements
    (``self.counts[i] = self.counts[i] + n``, ``self.counts[i] += 1``)?  A per-index tally nothing else reads takes
    one scalar at a time (no device clash) and a checkpoint without it loses nothing any code reads.  A whole-tensor
    accumulation (``self.seen += x.sum(0)``) meets the batch's tensors: not this."""
    if any(isinstance(n, ast.Constant) and n.value == attr for n in ast.walk(ix.tree)):
        return False  # getattr(self, "attr"), a name in a list of attributes: read in a way not followed here
    inside = {id(n) for n in ast.walk(init)}

    def own(node: ast.AST | None) -> bool:
        if not isinstance(node, ast.Subscript):
            return False
        while isinstance(node, ast.Subscript):
            node = node.value
        return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
            and node.value.id == "self"

    updating: set[int] = set()
    for n in ast.walk(cls):
        if isinstance(n, ast.AugAssign) and own(n.target):
            updating.update(id(m) for m in ast.walk(n))
        elif isinstance(n, ast.Assign) and len(n.targets) == 1 and own(n.targets[0]):
            updating.update(id(m) for m in ast.walk(n))
    reads = [a for a in ast.walk(ix.tree) if isinstance(a, ast.Attribute) and a.attr == attr
             and isinstance(a.ctx, ast.Load) and id(a) not in inside]
    if not reads or any(not (isinstance(a.value, ast.Name) and a.value.id == "self") for a in reads):
        return False
    return all(id(a) in updating for a in reads)


#: calls whose result is a Python value or an iterator over the tensor's elements, not a tensor that meets others
_PYTHON_SIDE = frozenset({"tolist", "item", "numel", "dim", "size"})
_ITERATING = frozenset({"enumerate", "zip", "reversed", "len", "list", "tuple", "bool", "int", "float"})


def _read_only_as_python_values(cls: ast.ClassDef, init: ast.FunctionDef, attr: str) -> bool:
    """Every read of ``self.attr`` outside ``__init__`` yields Python values or a loop over a 1-d tensor's 0-dim
    elements (``for flag in self.mask``, ``enumerate(self.mask)``, ``len(self.mask)``, ``self.mask.tolist()``),
    which mix with tensors on any device: where it lives does not matter, and moving it is nobody's loss.
    Only a tensor built from a flat Python list or a 1-d factory qualifies (a row of a 2-d one is not 0-dim)."""
    in_init = {id(n) for n in ast.walk(init)}
    parents = {c: n for n in ast.walk(cls) for c in ast.iter_child_nodes(n)}
    reads = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == attr
             and isinstance(n.value, ast.Name) and n.value.id == "self" and isinstance(n.ctx, ast.Load)
             and id(n) not in in_init]
    writes = [n for n in ast.walk(cls) if isinstance(n, ast.Attribute) and n.attr == attr
              and isinstance(n.value, ast.Name) and n.value.id == "self" and not isinstance(n.ctx, ast.Load)
              and id(n) not in in_init]
    if not reads or writes:
        return False  # state the run changes is state a checkpoint must hold
    for r in reads:
        up = parents.get(r)
        if isinstance(up, ast.Attribute) and up.attr in _PYTHON_SIDE and isinstance(parents.get(up), ast.Call):
            continue
        if isinstance(up, (ast.For, ast.comprehension)) and up.iter is r:
            continue
        if (isinstance(up, ast.Call) and isinstance(up.func, ast.Name) and up.func.id in _ITERATING
                and r in up.args):
            outer = parents.get(up)
            if up.func.id == "len" or (isinstance(outer, (ast.For, ast.comprehension)) and outer.iter is up):
                continue
        return False
    return True


def _flat(value: ast.expr) -> bool:
    """``torch.tensor([...flat...])``/``torch.tensor(name)`` of a list of scalars, or a 1-d factory call."""
    while isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr in _TENSOR_METHODS \
            and isinstance(value.func.value, ast.Call):
        value = value.func.value
    if not isinstance(value, ast.Call) or not value.args:
        return False
    fn = (dotted(value.func) or "").rsplit(".", 1)[-1]
    arg = value.args[0]
    if fn in ("tensor", "as_tensor"):
        if isinstance(arg, (ast.List, ast.Tuple)):
            return not any(isinstance(e, (ast.List, ast.Tuple, ast.ListComp)) for e in arg.elts)
        if isinstance(arg, ast.ListComp):
            return not isinstance(arg.elt, (ast.List, ast.Tuple, ast.ListComp))
        return False
    return fn in ("zeros", "ones", "full", "empty", "arange", "rand", "randn", "randperm") and len(value.args) == 1 \
        and not isinstance(arg, (ast.List, ast.Tuple))


@rule("unregistered-tensor")
def unregistered_tensor(ix: FileIndex) -> Iterator[Hit]:
    if ix.is_test_file:
        return  # a test module's fixed inputs and expected values
    for name, cls, init in _module_inits(ix):
        nodes = list(ast.walk(cls))
        registered = {n.args[0].value for n in nodes if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
                      and n.func.attr in ("register_buffer", "register_parameter") and n.args
                      and isinstance(n.args[0], ast.Constant)}
        reassigned = {_self_attr(t) for n in nodes if isinstance(n, ast.Assign) and _builds_module(ix, n.value)
                      for t in n.targets}  # self.x = nn.Parameter(...) somewhere
        for n in ast.walk(init):
            if not isinstance(n, ast.Assign) or not _makes_tensor(ix, n.value):
                continue
            for t in n.targets:
                attr = _self_attr(t)
                if attr is None or attr.startswith("_") or attr in registered or attr in reassigned:
                    continue
                if attr == "example_input_array" or _scalar_tensor(n.value) or _moved_where_used(cls, attr, ix):
                    continue  # Lightning's sample input; a 0-dim tensor mixes with any device; moved at use
                if _resynced_constant(ix, cls, init, n.value, attr):
                    continue  # a shape-only constant the module moves to its device itself, before use
                if _shape_only(ix, init, n.value, attr) and _meets_only_host_tensors(ix, cls, init, attr):
                    continue  # a constant used only with tensors built on the host, into which it is written
                if _used_only_in_init(ix, init, attr) or _only_updates_itself(ix, cls, init, attr):
                    continue  # a construction-time value, one never read, or a tally only read to update itself
                if _flat(n.value) and _read_only_as_python_values(cls, init, attr):
                    continue  # read as Python values only (a loop over flags): its device never matters
                yield Hit("unregistered-tensor", n,
                          f"self.{attr} is a plain tensor attribute of {name}, not a buffer: model.to(device) "
                          f"leaves it where it is and state_dict()/checkpoints do not save it", fix=f"use "
                          f"self.register_buffer({attr!r}, ...) (persistent=False if it must not be saved)")
