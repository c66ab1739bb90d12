"""A random split over rows that repeat the same units (OVT541 ``split-over-copies``, issue 33).

An invariant of every correct evaluation: no unit the model is tested on was seen in training.  A data
set whose rows repeat their units -- each undirected edge listed both ways (``cat([E, E.flip(1)])``), a
sample next to its flipped, rotated or noisy copy, several rows per patient made by indexing a table of
patients with a repeated id (``base[arange(P).repeat_interleave(K)]``) -- split at random over its rows
puts most units on both sides: a test edge's reverse, a test image's mirror, another image of a test
patient are training rows, and the test score measures recognition of seen units (THUDM/CogDL#18: "a
great portion of the generated test edges are also in the training set, just with a reversed order";
Lightning-Universe/lightning-Covid19#11: "images from a single patient can be in both (all) train,
valid (test) sets").

The rule proves both halves from the code: the rows are a concatenation of an array with a transform of
itself (``flip``, ``fliplr``/``flipud``, ``rot90``, ``roll``, the columns reversed ``[:, [1, 0]]`` or
``[:, ::-1]``, the array again), a repeat of it (``repeat``/``repeat_interleave``/``np.repeat``/
``np.tile`` along the rows), or an index of a table by a group id bound to a repeated ``arange``; and
they are split at random in the same function -- the split forms of ``windows-split-at-random``
(``train_test_split``, ``random_split``, a permutation of their length cut in two), a scikit-learn splitter
that ignores groups (``KFold(...).split(R)``, ``StratifiedKFold``, ``ShuffleSplit``), or a random mask
used as ``R[m]`` and ``R[~m]`` whose draw refers neither to the group id nor to the array before the
copies (a mask drawn over the units and expanded stays silent).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg, names_in, tokens
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.windowsplit import follow_copies, random_splits

_CONCAT = frozenset({"cat", "concat", "concatenate", "vstack", "row_stack"})
_FLIPS = frozenset({"flip", "fliplr", "flipud", "rot90", "roll"})
_SPLITTERS = frozenset({"KFold", "StratifiedKFold", "ShuffleSplit", "StratifiedShuffleSplit", "RepeatedKFold",
                        "RepeatedStratifiedKFold"})  # shuffled or not, each fold's rows have copies in the others
#: words of a function that returns a transformed copy of its argument, sample by sample
_AUGMENT = frozenset({"augment", "augmented", "augmentation", "aug", "flip", "flipped", "mirror", "mirrored", "rotate",
                      "rotated", "jitter", "perturb", "perturbed", "noisy"})
_RANDOM = frozenset({"randperm", "permutation", "rand", "random", "random_sample", "choice", "randint", "shuffle",
                     "bernoulli", "multinomial", "sample", "uniform"})


def _base_of_transform(node: ast.AST) -> str | None:
    """The array ``A`` when ``node`` is ``A`` itself or a transform of it that keeps its units."""
    if isinstance(node, ast.Call):
        f = node.func
        last = (dotted(f) or "").rsplit(".", 1)[-1] if not isinstance(f, ast.Attribute) else f.attr
        if isinstance(f, ast.Attribute) and last in _FLIPS and dotted(f.value) not in ("torch", "np", "numpy"):
            return dotted(f.value)
        if last in _FLIPS and node.args:
            return dotted(node.args[0])
        if set(tokens(last)) & _AUGMENT and node.args:  # augment(X), random_flip(X), add_noise(X)
            return dotted(node.args[0])
        return None
    if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Tuple) and len(node.slice.elts) == 2:
        first, cols = node.slice.elts
        if isinstance(first, ast.Slice) and first.lower is None and first.upper is None:
            text = ast.unparse(cols).replace(" ", "")
            if text in ("[1,0]", "::-1"):
                return dotted(node.value)
    return None


def _along_rows(call: ast.Call) -> bool:
    axis = kwarg(call, "dim") or kwarg(call, "axis")
    if axis is None and len(call.args) > 1:
        axis = call.args[1]
    return axis is None or is_const(axis, 0) or (isinstance(axis, ast.Constant) and axis.value == 0)


def _concat_copies(node: ast.AST, bound: dict[str, ast.AST] | None = None) -> tuple[str, str, str] | None:
    """(the unit array, how, what a copy is) for ``cat([A, f(A)])`` along the rows (``f(A)`` written in the call
    or bound once, in ``bound``, to a name passed)."""
    if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], (ast.List, ast.Tuple))):
        return None
    if (dotted(node.func) or "").rsplit(".", 1)[-1] not in _CONCAT or not _along_rows(node):
        return None
    parts = node.args[0].elts
    if len(parts) < 2 or not isinstance(parts[0], ast.Name):
        return None
    base = parts[0].id
    bound = bound or {}
    others = [bound.get(p.id, p) if isinstance(p, ast.Name) and p.id != base else p for p in parts[1:]]
    if all(isinstance(p, ast.Name) and p.id == base for p in others):
        return base, f"`{base}` listed {len(parts)} times", "the duplicate"
    if all(_base_of_transform(p) == base for p in others):
        return base, f"every row of `{base}` next to its transform `{ast.unparse(others[0])}`", \
            "the transformed copy (the reverse edge, the mirrored sample)"
    return None


def _repeat_copies(node: ast.AST) -> tuple[str, str, str] | None:
    """(the unit array, how) for ``A.repeat_interleave(k, 0)``, ``np.repeat(A, k, axis=0)``, ``np.tile(A, (k, 1))``."""
    if not isinstance(node, ast.Call):
        return None
    f = node.func
    if isinstance(f, ast.Attribute) and f.attr == "repeat_interleave" and dotted(f.value) not in ("torch",):
        dim = kwarg(node, "dim") or (node.args[1] if len(node.args) > 1 else None)
        if dim is not None and is_const(dim, 0) or (isinstance(dim, ast.Constant) and dim.value == 0):
            return dotted(f.value), f"every row of `{dotted(f.value)}` repeated", "the repeat"
    last = (dotted(f) or "").rsplit(".", 1)[-1]
    if last == "repeat" and dotted(f) in ("np.repeat", "numpy.repeat") and len(node.args) >= 2:
        axis = kwarg(node, "axis") or (node.args[2] if len(node.args) > 2 else None)
        if axis is not None and isinstance(axis, ast.Constant) and axis.value == 0:
            return dotted(node.args[0]), f"every row of `{ast.unparse(node.args[0])}` repeated", "the repeat"
    return None


def _repeated_ids(value: ast.AST) -> bool:
    """``arange(P).repeat_interleave(K)``, ``arange(P).repeat(K)``, ``np.repeat(np.arange(P), K)``,
    ``np.tile(np.arange(P), K)``: ids of P units, each on several rows."""
    if not isinstance(value, ast.Call):
        return False
    f = value.func

    def _arange(n: ast.AST) -> bool:
        return isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] == "arange"

    if isinstance(f, ast.Attribute) and f.attr in ("repeat_interleave", "repeat") and _arange(f.value) \
            and len(value.args) == 1 and not (isinstance(value.args[0], ast.Constant) and value.args[0].value == 1):
        return True
    return dotted(f) in ("np.repeat", "numpy.repeat", "np.tile", "numpy.tile") and len(value.args) == 2 \
        and _arange(value.args[0])


def _group_rows(ix: FileIndex, node: ast.AST, scope: ast.AST | None) -> tuple[str, str, str] | None:
    """(the group id, how, what the copy is) when ``node`` is ``T[G]`` (or arithmetic over it) with G a repeated id."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Subscript) and isinstance(sub.slice, ast.Name):
            g = sub.slice.id
            values = [v for v in ix.assigns.get(g, []) if ix.enclosing_function(v) is scope]
            if len(values) == 1 and _repeated_ids(values[0]):
                return g, f"rows of `{dotted(sub.value) or ast.unparse(sub.value)}` indexed by the group id `{g}`, " \
                          f"several rows per group (line {values[0].lineno})", f"another row of the same `{g}`"
    return None


def _copy_sets(ix: FileIndex, scope: ast.AST | None) -> dict[str, tuple[ast.AST, str, set[str], str]]:
    """Names of the function ``scope`` (None: the module) holding rows that repeat their units -> (where made,
    how, names a unit-level split refers to, what a row's copy is)."""
    out: dict[str, tuple[ast.AST, str, set[str], str]] = {}
    once = {}  # names bound once in the scope -> their value
    for name, every in ix.assigns.items():
        mine = [v for v in every if ix.enclosing_function(v) is scope]
        if len(mine) == 1:
            once[name] = mine[0]
    for name, every in ix.assigns.items():
        values = [v for v in every if ix.enclosing_function(v) is scope]
        if "." in name or not values:
            continue
        first = values[0]
        found = _concat_copies(first, once) or _repeat_copies(first)
        units: set[str] = set()
        if found:
            units = {found[0]}
        else:
            grouped = _group_rows(ix, first, scope)
            if grouped:
                found, units = grouped, {grouped[0]}
        if not found or not found[0]:
            continue
        # later bindings may only transform the rows in place: images = images * mask
        if any(not (isinstance(v, ast.BinOp) and name in names_in(v)) for v in values[1:]):
            continue
        out[name] = (first, found[1], units, found[2])
    for loop in ix.loops:
        if ix.enclosing_function(loop) is scope and isinstance(loop, ast.For):
            for name, (where, how) in _appended_copies(ix, loop).items():
                out.setdefault(name, (where, how, set(), "the transformed copy (the mirrored or augmented sample)"))
    return out


def _appended_copies(ix: FileIndex, loop: ast.For) -> dict[str, tuple[ast.AST, str]]:
    """Lists that a loop body appends a sample and a transform of it to: ``L.append(x); L.append(flip(x))``."""
    appended: dict[str, list[ast.Call]] = {}
    for node in ix.stmts_nodes(loop.body):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append" \
                and len(node.args) == 1 and dotted(node.func.value):
            appended.setdefault(dotted(node.func.value) or "", []).append(node)
    out: dict[str, tuple[ast.AST, str]] = {}
    for name, calls in appended.items():
        plain = {dotted(c.args[0]) for c in calls if isinstance(c.args[0], ast.Name)}
        for c in calls:
            base = _base_of_transform(c.args[0])
            if base and base in plain:
                out[name] = (c, f"each `{base}` appended next to `{ast.unparse(c.args[0])}`")
                break
    return out


def _drawn(ix: FileIndex, node: ast.AST, stop: str, depth: int = 0) -> set[str]:
    """Every name ``node`` depends on through single bindings (not through ``stop``, the rows themselves:
    ``rand(len(rows))``), and ``@random`` when a random draw is among them."""
    seen: set[str] = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            last = (dotted(sub.func) or "").rsplit(".", 1)[-1]
            if isinstance(sub.func, ast.Attribute):
                last = sub.func.attr
            if last in _RANDOM:
                seen.add("@random")
        if isinstance(sub, ast.Name):
            seen.add(sub.id)
            values = ix.assigns.get(sub.id, [])
            if depth < 4 and len(values) == 1 and values[0] is not node and sub.id != stop:
                seen |= _drawn(ix, values[0], stop, depth + 1)
    return seen


def _complement_masks(ix: FileIndex, copies: dict) -> Iterator[tuple[ast.AST, str]]:
    """(the mask's binding, the row set) for ``R[m]`` and ``R[~m]`` with a random ``m``."""
    plain: dict[tuple[str, str], ast.Subscript] = {}
    negated: dict[tuple[str, str], ast.Subscript] = {}
    for sub in ast.walk(ix.tree):
        if not isinstance(sub, ast.Subscript) or dotted(sub.value) not in copies:
            continue
        sl = sub.slice
        if isinstance(sl, ast.Name):
            plain.setdefault((dotted(sub.value), sl.id), sub)
        elif isinstance(sl, ast.UnaryOp) and isinstance(sl.op, ast.Invert) and isinstance(sl.operand, ast.Name):
            negated.setdefault((dotted(sub.value), sl.operand.id), sub)
    for key, node in plain.items():
        if key not in negated:
            continue
        rows, mask = key
        values = ix.assigns.get(mask, [])
        if len(values) != 1:
            continue
        deps = _drawn(ix, values[0], rows)
        made, _, units, _ = copies[rows]
        if "@random" not in deps or deps & units:
            continue
        if any(isinstance(s, ast.Call) and (dotted(s.func) or "").rsplit(".", 1)[-1] in _CONCAT | {"repeat",
               "repeat_interleave", "tile"} for s in ast.walk(values[0])):
            continue
        yield values[0], rows


def _splitter_splits(ix: FileIndex, copies: dict) -> Iterator[tuple[ast.AST, str]]:
    """``KFold(...).split(R)`` (a scikit-learn splitter that ignores groups, bound or written in the call)."""
    for call in ix.calls:
        if not (isinstance(call.func, ast.Attribute) and call.func.attr == "split" and call.args
                and dotted(call.args[0]) in copies):
            continue
        owner = call.func.value
        values = [owner] if isinstance(owner, ast.Call) else ix.assigns.get(dotted(owner) or "", [])
        kinds = {(ix.qualname(v.func) or dotted(v.func) or "").rsplit(".", 1)[-1] for v in values
                 if isinstance(v, ast.Call)}
        if len(kinds) == 1 and kinds & _SPLITTERS:
            yield call, dotted(call.args[0]) or ""


def _scope(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    return ix.enclosing_function(node)


@rule("split-over-copies")
def split_over_copies(ix: FileIndex) -> Iterator[Hit]:
    scopes = {ix.enclosing_function(v) for values in ix.assigns.values() for v in values
              if isinstance(v, ast.Call) and (dotted(v.func) or "").rsplit(".", 1)[-1] in _CONCAT | {"repeat"}
              or isinstance(v, ast.Call) and isinstance(v.func, ast.Attribute) and v.func.attr == "repeat_interleave"
              or isinstance(v, (ast.Subscript, ast.BinOp))} | {ix.enclosing_function(loop) for loop in ix.loops}
    for scope in sorted(scopes, key=lambda s: getattr(s, "lineno", 0)):
        yield from _split_hits(ix, scope)


def _split_hits(ix: FileIndex, scope: ast.AST | None) -> Iterator[Hit]:
    copies = _copy_sets(ix, scope)
    if not copies:
        return
    made_at = {name: value[0] for name, value in copies.items()}
    for name in follow_copies(ix, made_at):
        here = any(ix.enclosing_function(v) is scope for v in ix.assigns.get(name, []))
        if name not in copies and here:  # a copy made in this function (``X = np.array(xs)``)
            src = next(n for n, m in made_at.items() if m is made_at[name] and n in copies)
            copies[name] = copies[src]
    seen: set[int] = set()
    for node, rows in list(random_splits(ix, copies)) + list(_complement_masks(ix, copies)) + list(
            _splitter_splits(ix, copies)):
        if id(node) in seen:
            continue
        made, how, _, copy = copies[rows]
        if _scope(ix, node) is not scope:
            continue
        seen.add(id(node))
        yield Hit("split-over-copies", node,
                  f"`{ix.segment(node)}` splits `{rows}` at random over its rows, but its rows repeat their units "
                  f"({how}, line {made.lineno}): most units land on both sides, and {copy} of a test row is among the "
                  "training rows, so the test score measures recognition of units the model has seen",
                  fix="split the units, then expand each side: draw the split over the unique edges, the original "
                  "samples or the group ids (GroupShuffleSplit / torch.isin(group, test_groups)) and add the reverse "
                  "edges or augmented copies of the training side only")
