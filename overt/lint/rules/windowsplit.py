"""Overlapping windows split at random (OVT533 ``windows-split-at-random``, issue 33).

Sliding windows of a series taken one step apart share all but one of their values with their
neighbours.  Split into training and test sets at random, almost every test window has training
windows on both sides: its inputs and its target are in the training data, and the test period is
no longer later than the training one, so the test error measures interpolation of a series the
model has seen, not forecasting (Y-debug-sys/Diffusion-TS#67: "each sample in the test_data is at
least partly already in the train_data. In a Time series setting you would usually split a specific
point in time").

The rule: a set of windows of stride 1 (or a literal stride below a literal width) -- a
comprehension or loop over ``range(...)`` that collects ``S[i:i + L]``, ``S.unfold(0, L, 1)``,
``sliding_window_view(S, L)``, or a Dataset whose ``__getitem__`` returns ``self.S[idx:idx + L]`` --
split at random: ``train_test_split`` of it without ``shuffle=False``, ``random_split`` of it (or of a
``TensorDataset`` over it), or a permutation of its length (``randperm(len(W))``,
``np.random.permutation(len(W))``, a shuffled ``arange``) cut in two (``perm[:cut]`` and
``perm[cut:]``).  Quiet on windows that do not overlap (stride equal to the width), on a split at a
point in time, and on a permutation used only to draw mini-batches (``perm[k:k + B]``).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg
from overt.lint.rules.base import Hit, rule


def _loop_vars(gen: ast.comprehension | ast.For) -> tuple[str, ast.Call] | None:
    """(index name, the range call) of ``for i in range(...)`` with an overlapping stride, else None."""
    it, target = gen.iter, gen.target
    if not (isinstance(it, ast.Call) and dotted(it.func) == "range" and isinstance(target, ast.Name)):
        return None
    return target.id, it


def _window(node: ast.AST, index: str, rng: ast.Call) -> str | None:
    """The sliced series' text when ``node`` is ``S[i:i + L]`` (or ``S[i - L:i]``) with a stride below L."""
    if not isinstance(node, ast.Subscript):
        return None
    sl = node.slice
    if isinstance(sl, ast.Tuple) and sl.elts:
        sl = sl.elts[0]
    if not isinstance(sl, ast.Slice) or sl.lower is None or sl.upper is None or sl.step is not None:
        return None
    width = _offset(sl.upper, index)
    start = _offset(sl.lower, index)
    if width is None or start is None:
        return None
    step = rng.args[2] if len(rng.args) == 3 else None
    if step is not None and not is_const(step, 1):
        widths = [w for w in (width, start) if w is not None]
        if not (isinstance(step, ast.Constant) and isinstance(step.value, int)
                and all(isinstance(w, ast.Constant) and isinstance(w.value, int) for w in widths)
                and step.value < abs(_diff(width, start))):
            return None
    if isinstance(width, ast.Constant) and isinstance(start, ast.Constant) and abs(_diff(width, start)) <= 1:
        return None
    return dotted(node.value) or "the series"


def _offset(node: ast.AST, index: str) -> ast.expr | None:
    """``k`` when ``node`` is ``index + k``, ``index - k`` (negated) or ``index`` (0), else None."""
    if isinstance(node, ast.Name) and node.id == index:
        return ast.Constant(0)
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)):
        if isinstance(node.left, ast.Name) and node.left.id == index and index not in _names(node.right):
            if isinstance(node.op, ast.Sub):
                return ast.Constant(-node.right.value) if isinstance(node.right, ast.Constant) \
                    and isinstance(node.right.value, int) else ast.UnaryOp(ast.USub(), node.right)
            return node.right
        if isinstance(node.op, ast.Add) and isinstance(node.right, ast.Name) and node.right.id == index \
                and index not in _names(node.left):
            return node.left
    return None


def _diff(a: ast.expr, b: ast.expr) -> int:
    av = a.value if isinstance(a, ast.Constant) else 0
    bv = b.value if isinstance(b, ast.Constant) else 0
    if not isinstance(a, ast.Constant) or not isinstance(b, ast.Constant):
        return 2  # a width that is a name: more than one step
    return int(av) - int(bv)


def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _window_sets(ix: FileIndex) -> dict[str, ast.AST]:
    """Names holding overlapping windows -> where they were made."""
    out: dict[str, ast.AST] = {}
    for name, values in ix.assigns.items():
        for value in values:
            inner = value
            while isinstance(inner, ast.Call) and inner.args and not isinstance(inner, ast.ListComp) \
                    and (dotted(inner.func) or "").rsplit(".", 1)[-1] in (
                        "stack", "array", "asarray", "tensor", "as_tensor", "list", "vstack", "from_numpy", "float"):
                inner = inner.args[0]
            if isinstance(inner, ast.Call) and isinstance(inner.func, ast.Attribute) and inner.func.attr == "float":
                inner = inner.func.value
            if isinstance(inner, (ast.ListComp, ast.GeneratorExp)) and len(inner.generators) == 1:
                found = _loop_vars(inner.generators[0])
                elts = inner.elt.elts if isinstance(inner.elt, ast.Tuple) else [inner.elt]
                if found and any(_window(e, *found) for e in elts):
                    out[name] = value
            if isinstance(inner, ast.Call) and _is_unfold(inner):
                out[name] = value
    for loop in ix.loops:
        if not isinstance(loop, ast.For):
            continue
        found = _loop_vars(loop)
        if not found:
            continue
        for sub in ast.walk(loop):
            if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr == "append" \
                    and len(sub.args) == 1:
                arg = sub.args[0]
                elts = arg.elts if isinstance(arg, ast.Tuple) else [arg]
                target = dotted(sub.func.value)
                if target and any(_window(e, *found) for e in elts):
                    out.setdefault(target, sub)
    follow_copies(ix, out)
    for cname, cls in ix.classes.items():
        if _window_dataset(cls):
            for name, values in ix.assigns.items():
                if any(isinstance(v, ast.Call) and dotted(v.func) == cname for v in values):
                    out[name] = cls
    return out


def follow_copies(ix: FileIndex, out: dict[str, ast.AST]) -> dict[str, ast.AST]:
    """Add to ``out`` (name -> where its rows were made) the names that copy one of its sets
    (``X = np.array(X)``, ``ds = TensorDataset(W, y)``), with the same value; returns ``out``."""
    for _ in range(2):
        for name, values in ix.assigns.items():
            for value in values:
                if name not in out and isinstance(value, ast.Call) and any(
                        dotted(a) in out for a in value.args) and (dotted(value.func) or "").rsplit(".", 1)[-1] in (
                        "array", "asarray", "tensor", "as_tensor", "stack", "TensorDataset", "from_numpy"):
                    out[name] = out[next(dotted(a) for a in value.args if dotted(a) in out)]
    return out


def _is_unfold(call: ast.Call) -> bool:
    q = dotted(call.func) or ""
    if q.rsplit(".", 1)[-1] == "sliding_window_view":
        return True  # numpy's windows have stride 1
    if isinstance(call.func, ast.Attribute) and call.func.attr == "unfold" and len(call.args) == 3:
        size, step = call.args[1], call.args[2]
        if is_const(step, 1) and not is_const(size, 1):
            return True
        return isinstance(size, ast.Constant) and isinstance(step, ast.Constant) \
            and isinstance(size.value, int) and isinstance(step.value, int) and step.value < size.value
    return False


def _window_dataset(cls: ast.ClassDef) -> bool:
    for fn in cls.body:
        if isinstance(fn, ast.FunctionDef) and fn.name == "__getitem__" and len(fn.args.args) == 2:
            index = fn.args.args[1].arg
            rng = ast.Call(func=ast.Name("range"), args=[], keywords=[])
            for sub in ast.walk(fn):
                if isinstance(sub, ast.Return) and sub.value is not None:
                    elts = sub.value.elts if isinstance(sub.value, ast.Tuple) else [sub.value]
                    if any(_window(e, index, rng) for e in elts):
                        return True
    return False


def _length_of(node: ast.AST, names: dict[str, ast.AST]) -> str | None:
    """The window set whose length ``node`` is (``len(W)``, ``W.shape[0]``, ``W.size(0)``)."""
    if isinstance(node, ast.Call) and dotted(node.func) == "len" and node.args and dotted(node.args[0]) in names:
        return dotted(node.args[0])
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "shape":
        return dotted(node.value.value) if dotted(node.value.value) in names else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "size":
        return dotted(node.func.value) if dotted(node.func.value) in names else None
    return None


def cut_in_two(ix: FileIndex, perm: str, within: ast.AST) -> ast.Subscript | None:
    """The ``perm[cut:]`` half when ``perm`` is sliced both ``[:cut]`` and ``[cut:]`` in the scope ``within``."""
    head = tail = None
    for sub in ix.scope_nodes(within):
        if isinstance(sub, ast.Subscript) and dotted(sub.value) == perm and isinstance(sub.slice, ast.Slice) \
                and sub.slice.step is None:
            if sub.slice.lower is None and sub.slice.upper is not None:
                head = sub
            elif sub.slice.upper is None and sub.slice.lower is not None:
                tail = sub
    return tail if head is not None and tail is not None else None


def random_splits(ix: FileIndex, windows: dict) -> Iterator[tuple[ast.AST, str]]:
    """(the node that splits at random, the set of ``windows`` (names) it splits)."""
    for call in ix.calls:
        last = (ix.qualname(call.func) or "").rsplit(".", 1)[-1]
        if last == "train_test_split":
            shuffle = kwarg(call, "shuffle")
            if shuffle is not None and not is_const(shuffle, True):
                continue
            for a in call.args:
                if dotted(a) in windows:
                    yield call, dotted(a)
                    break
        elif last == "random_split" and call.args and dotted(call.args[0]) in windows:
            yield call, dotted(call.args[0])
    for name, values in ix.assigns.items():
        for value in values:
            if not isinstance(value, ast.Call):
                continue
            last = (ix.qualname(value.func) or "").rsplit(".", 1)[-1]
            if last in ("randperm", "permutation") and value.args:
                w = _length_of(value.args[0], windows)
                if w is None and last == "permutation" and dotted(value.args[0]) in windows:
                    w = dotted(value.args[0])  # np.random.permutation(windows): the windows themselves
            elif last == "arange" and value.args and any(
                    isinstance(c.func, ast.Attribute) and c.func.attr == "shuffle" and c.args
                    and dotted(c.args[0]) == name for c in ix.calls):
                w = _length_of(value.args[0], windows)
            else:
                continue
            if w is None:
                continue
            tail = cut_in_two(ix, name, ix.enclosing_function(value) or ix.tree)
            if tail is not None:
                yield value, w


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """The function that holds ``node`` (None at the module's top level)."""
    while node is not None:
        node = ix.parents.get(node)
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


@rule("windows-split-at-random")
def windows_split_at_random(ix: FileIndex) -> Iterator[Hit]:
    windows = _window_sets(ix)
    if not windows:
        return
    seen: set[int] = set()
    for node, w in random_splits(ix, windows):
        if id(node) in seen:
            continue
        seen.add(id(node))
        made = windows[w]
        if not isinstance(made, ast.ClassDef) and _scope(ix, made) is not _scope(ix, node):
            continue  # the same name in another function: not known to be these windows
        where = f"line {made.lineno}" if hasattr(made, "lineno") else "above"
        yield Hit("windows-split-at-random", node,
                  f"`{ix.segment(node)}` splits `{w}`, overlapping sliding windows of one series ({where}), at "
                  "random: each test window shares most of its values with training windows on both sides, and its "
                  "target is among the training inputs, so the test error measures interpolation of data the model "
                  "has seen, not prediction of a later period",
                  fix="split at a point in time: the windows that end before the cut train, the ones that start "
                  "after it (leave a gap of one window) test (train_test_split(..., shuffle=False), or slice "
                  "windows[:cut] / windows[cut + L:]); shuffle only the training windows")
