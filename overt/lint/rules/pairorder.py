"""Names paired by position with values that come in another order (OVT530 ``pairing-order-mismatch``,
issue 33 family ``orders``).

Premise: two sequences paired by position -- zipped, or a dictionary's keys read back as a list of
values -- must come from one ordering.  A correct program pairs ``names[i]`` with the value computed for
``names[i]``.  The rule reports five forms where the two orders are provably different:

- **a sorted copy against the original order.**  ``zip(sorted(tasks), values)`` (or ``values[i]`` read in
  ``for i, name in enumerate(sorted(tasks))``) where ``values`` was
  computed by iterating ``tasks`` itself (a comprehension or an ``append`` loop over ``tasks``,
  ``zip(..., tasks)``, ``enumerate(tasks)``, ``tasks.items()``; ``d.values()`` beside ``sorted(d)``): each
  value is reported under another name unless ``tasks`` happens to be sorted already.  Reported when
  ``tasks`` is a literal whose items are out of order (or a comprehension over one) and nothing sorts it
  (no ``sorted(...)`` around its definition, no ``tasks.sort()``); silent when it is a sorted literal,
  sorted anywhere, a parameter, an attribute or built any other way (its order is not known).
  NVIDIA-Merlin/models#750: task metrics named by the sorted task names, computed in creation order.
- **decimal keys sorted as strings.**  A dictionary keyed by ``str(n)`` (or ``f"{n}"``) of a number
  (``.item()``, ``int(...)``, ``len(...)``, a ``range`` loop variable) sorted with no ``key=``
  (``sorted(d.items())``, ``sorted(d)``) and read back by position (``dict(sorted(...))`` whose
  ``values()`` are collected, a list of its values): the order is ``'0', '1', '10', '11', ..., '2'``, so
  from eleven keys on the i-th value is not class i's.  Silent with ``key=int``, zero-padded keys
  (``f"{n:03d}"``), keys that are not numbers, and sorted items only printed or looked up by key.
  Chumsy0725/logit-adj-pytorch#2: logit-adjustment priors in the order '0', '1', '10', ....
- **block-major against item-major.**  Two arguments of one call, ``torch.cat(blocks)`` along dim 0 and
  ``x.repeat_interleave(f, dim=0)`` whose count multiplies in ``len(blocks)`` (or is the literal list's
  length): row r of one is not row r of the other.  OpenTabular/DeepTab#414.
- **a returned tuple unpacked in the other order** (:mod:`overt.lint.rules.unpacknames`).
  bm2-lab/scPerturBench#13.
- **a table re-indexed by the new vocabulary's own positions.**  ``[vectors[w2i[w]] for w in w2i]``
  loaded into an embedding, where ``w2i`` numbers its keys in insertion order: the table's first rows in
  their own order, no word looked up.  DSKSD/DeepNLP-models-Pytorch#12.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, kwarg
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.unpacknames import unpack_hits

_SLUG = "pairing-order-mismatch"


def nodes(ix: FileIndex) -> list[ast.AST]:
    """Every node of the file (the index's parent map holds them all), listed once per file."""
    found = ix.cache.get("all-nodes")
    if found is None:
        found = ix.cache["all-nodes"] = list(ix.kids)
    return found


class _Scopes:
    """Assignments to plain names, per function (0: module level), in source order."""

    def __init__(self, ix: FileIndex) -> None:
        self.ix = ix
        self.assigns: dict[tuple[int, str], list[tuple[int, ast.AST]]] = {}
        self.sorted_in_place: set[tuple[int, str]] = set()
        self.appends: dict[tuple[int, str], list[ast.Call]] = {}
        self.params: set[tuple[int, str]] = set()
        for node in nodes(ix):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if isinstance(target, ast.Name):
                        self.assigns.setdefault((self.scope(node), target.id), []).append((node.lineno, node.value))
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                self.assigns.setdefault((self.scope(node), node.target.id), []).append((node.lineno, node.value))
            elif isinstance(node, (ast.For, ast.comprehension)) and isinstance(node.target, ast.Name):
                # a loop variable: its value is the loop's iterable's item
                self.assigns.setdefault((self.scope(node), node.target.id), []).append(
                    (getattr(node, "lineno", 0), ast.Starred(value=node.iter)))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                    and isinstance(node.func.value, ast.Name):
                key = (self.scope(node), node.func.value.id)
                if node.func.attr == "sort":
                    self.sorted_in_place.add(key)
                elif node.func.attr == "append":
                    self.appends.setdefault(key, []).append(node)
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for a in node.args.args + node.args.kwonlyargs + node.args.posonlyargs:
                    self.params.add((id(node), a.arg))

    def scope(self, node: ast.AST) -> int:
        func = self.ix.enclosing_function(node)
        return id(func) if func is not None else 0

    def value(self, name: str, at: ast.AST) -> ast.AST | None:
        """The value last assigned to ``name`` before ``at``, in its function or else at module level."""
        line = getattr(at, "lineno", 10 ** 9)
        for scope in dict.fromkeys((self.scope(at), 0)):
            found = [v for ln, v in self.assigns.get((scope, name), ()) if ln <= line]
            if found:
                return found[-1]
            if (scope, name) in self.params:
                return None
        return None

    def defined(self, name: str, at: ast.AST) -> tuple[int, str] | None:
        for scope in dict.fromkeys((self.scope(at), 0)):
            if (scope, name) in self.params:
                return None
            if (scope, name) in self.assigns:
                return (scope, name)
        return None


def _is_sorted_call(ix: FileIndex, node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and ix.qualname(node.func) == "sorted" and len(node.args) == 1


def _collection(node: ast.AST) -> str | None:
    """The name of the collection ``node`` enumerates in its own order: ``x``, ``x.keys()``, ``x.items()``,
    ``x.values()``, ``list(x)``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
            and node.func.attr in ("keys", "items", "values") and isinstance(node.func.value, ast.Name):
        return node.func.value.id
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
            and len(node.args) == 1:
        return _collection(node.args[0])
    return None


def _iterated(ix: FileIndex, node: ast.AST) -> set[str]:
    """The collections an iteration over ``node`` walks in their own order (``x``, ``zip(a, x)``,
    ``enumerate(x)``, ``x.items()``)."""
    if isinstance(node, ast.Call) and ix.qualname(node.func) in ("zip", "enumerate"):
        return {c for a in node.args if (c := _collection(a)) is not None}
    c = _collection(node)
    return {c} if c is not None else set()


class _Pairing:
    def __init__(self, ix: FileIndex) -> None:
        self.ix = ix
        self._scopes: _Scopes | None = None

    @property
    def scopes(self) -> _Scopes:
        if self._scopes is None:
            self._scopes = _Scopes(self.ix)
        return self._scopes

    def sorted_of(self, node: ast.AST, at: ast.AST, depth: int = 0) -> str | None:
        """``node`` is ``sorted(x)`` (or a name bound to it): the collection ``x``."""
        if _is_sorted_call(self.ix, node):
            return _collection(node.args[0])
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("list", "tuple") \
                and len(node.args) == 1:
            return self.sorted_of(node.args[0], at, depth)
        if isinstance(node, ast.Name) and depth < 3:
            v = self.scopes.value(node.id, at)
            return self.sorted_of(v, at, depth + 1) if v is not None else None
        return None

    def in_order_of(self, node: ast.AST, at: ast.AST, depth: int = 0) -> set[str]:
        """The collections whose own order ``node``'s items come in (a comprehension over them, their
        ``values()``, a list appended to in a loop over them)."""
        if isinstance(node, (ast.ListComp, ast.GeneratorExp)) and node.generators:
            return _iterated(self.ix, node.generators[0].iter)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
                and node.func.attr == "values" and isinstance(node.func.value, ast.Name):
            return {node.func.value.id}
        if isinstance(node, ast.Call) and self.ix.qualname(node.func) in ("list", "tuple") and len(node.args) == 1:
            return self.in_order_of(node.args[0], at, depth)
        if isinstance(node, ast.Name) and depth < 3:
            v = self.scopes.value(node.id, at)
            if isinstance(v, ast.List) and not v.elts:  # xs = [] then xs.append(...) in a loop over x
                key = self.scopes.defined(node.id, at)
                out: set[str] = set()
                for call in self.scopes.appends.get(key, ()) if key else ():
                    loops = self.ix.enclosing_loops(call)
                    if len(loops) == 1 and isinstance(loops[0], ast.For):
                        out |= _iterated(self.ix, loops[0].iter)
                return out
            return self.in_order_of(v, at, depth + 1) if v is not None else set()
        return set()

    def unsorted(self, name: str, at: ast.AST, depth: int = 0) -> bool:
        """``name`` is a collection of the program's whose order is provably not sorted: a literal (or a
        comprehension over one) whose items are out of order, that nothing sorts."""
        key = self.scopes.defined(name, at)
        if depth > 3 or key is None or key in self.scopes.sorted_in_place or (0, name) in self.scopes.sorted_in_place:
            return False
        v = self.scopes.value(name, at)
        if v is None or isinstance(v, ast.Starred):  # a loop variable: its order is unknown
            return False
        items = _literal_keys(self.ix, v)
        if items is not None:
            try:
                return items != sorted(items)
            except TypeError:
                return False
        if isinstance(v, (ast.ListComp, ast.DictComp)) and v.generators:
            if _is_sorted_call(self.ix, v.generators[0].iter):
                return False
            return any(self.unsorted(c, at, depth + 1) for c in _iterated(self.ix, v.generators[0].iter))
        return False


_DICT_TYPES = frozenset({"dict", "collections.OrderedDict", "torch.nn.ModuleDict", "torch.nn.ParameterDict"})


def _literal_keys(ix: FileIndex, node: ast.AST) -> list | None:
    """The constants a literal lists in its order: ``[a, b]``, ``(a, b)``, ``{a: .., b: ..}``, a dictionary
    type built from one (``nn.ModuleDict({...})``, ``OrderedDict([(a, ..), ...])``, ``dict(a=.., b=..)``)."""
    if isinstance(node, (ast.List, ast.Tuple)):
        items = node.elts
    elif isinstance(node, ast.Dict):
        items = node.keys
    elif isinstance(node, ast.Call) and ix.qualname(node.func) in _DICT_TYPES:
        if node.keywords and not node.args and all(k.arg for k in node.keywords):
            return [k.arg for k in node.keywords]
        if len(node.args) != 1 or node.keywords:
            return None
        arg = node.args[0]
        if isinstance(arg, ast.Dict):
            items = arg.keys
        elif isinstance(arg, (ast.List, ast.Tuple)) and all(isinstance(e, ast.Tuple) and len(e.elts) == 2
                                                            for e in arg.elts):
            items = [e.elts[0] for e in arg.elts]  # type: ignore[attr-defined]
        else:
            return None
    else:
        return None
    if len(items) < 2 or not all(isinstance(e, ast.Constant) for e in items):
        return None
    return [e.value for e in items]  # type: ignore[union-attr]


def _numeric(ix: FileIndex, scopes: _Scopes, node: ast.AST, at: ast.AST) -> bool:
    """``node`` is a number: ``x.item()``, ``int(x)``, ``len(x)``, a ``range`` loop variable."""
    if isinstance(node, ast.Call):
        if isinstance(node.func, ast.Attribute) and node.func.attr == "item" and not node.args:
            return True
        return ix.qualname(node.func) in ("int", "len")
    if isinstance(node, ast.Name):
        v = scopes.value(node.id, at)
        return isinstance(v, ast.Starred) and isinstance(v.value, ast.Call) and ix.qualname(v.value.func) == "range"
    return False


def _decimal_key(ix: FileIndex, scopes: _Scopes, node: ast.AST, at: ast.AST, depth: int = 0) -> bool:
    """``node`` is ``str(n)`` or ``f"{n}"`` of a number ``n`` (no format spec: zero padding sorts right)."""
    if isinstance(node, ast.Call) and ix.qualname(node.func) == "str" and len(node.args) == 1:
        return _numeric(ix, scopes, node.args[0], at)
    if isinstance(node, ast.JoinedStr) and len(node.values) == 1 and isinstance(node.values[0], ast.FormattedValue):
        fv = node.values[0]
        return fv.format_spec is None and fv.conversion in (-1, 115) and _numeric(ix, scopes, fv.value, at)
    if isinstance(node, ast.Name) and depth < 2:
        v = scopes.value(node.id, at)
        return v is not None and _decimal_key(ix, scopes, v, at, depth + 1)
    return False


def _decimal_keyed(ix: FileIndex, scopes: _Scopes, name: str, at: ast.AST) -> bool:
    """The dictionary ``name`` (in ``at``'s scope) is filled under decimal string keys."""
    scope = scopes.scope(at)
    key = ("decimal-keyed", scope, name)
    if key not in ix.cache:
        ix.cache[key] = _decimal_keyed_now(ix, scopes, name, at, scope)
    return ix.cache[key]


def _decimal_keyed_now(ix: FileIndex, scopes: _Scopes, name: str, at: ast.AST, scope: int) -> bool:
    for node in nodes(ix):
        sub = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            sub = node
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in ("get",) \
                and node.args:
            sub = ast.Subscript(value=node.func.value, slice=node.args[0])
        if sub is None or not isinstance(sub.value, ast.Name) or sub.value.id != name or scopes.scope(node) != scope:
            continue
        if _decimal_key(ix, scopes, sub.slice, node):
            return True
    v = scopes.value(name, at)
    return isinstance(v, ast.DictComp) and _decimal_key(ix, scopes, v.key, v)


@rule(_SLUG)
def pairing_order_mismatch(ix: FileIndex) -> Iterator[Hit]:
    text = "\n".join(ix.source_lines)
    for node, func, target, value, own in unpack_hits(ix):
        yield Hit(
            _SLUG, node,
            f"{func}() returns {value} at another position than the one unpacked into {target} (that position "
            f"holds {own}): the caller reads the returned halves swapped, so the program pairs (or trains from) "
            "each value under the other's name and nothing fails",
            fix=f"unpack in the order {func}() returns, or return the values in the order its callers read them",
            why="a function's returned tuple and its callers' unpacking are one pairing and must follow one order",
        )
    p = _Pairing(ix)
    if "from_pretrained" in text or ".weight" in text:
        yield from _reindex_hits(p)
    if "repeat_interleave" in text:
        yield from _layout_hits(p)
    if "sorted" not in text:
        return
    for loop in ix.loops:
        yield from _enumerate_hits(p, loop)
    for node in ix.calls:
        if ix.qualname(node.func) == "zip" and len(node.args) == 2 and not node.keywords:
            yield from _zip_hits(p, node)
        elif _is_sorted_call(ix, node) and kwarg(node, "key") is None:
            hit = _decimal_sort_hit(p, node)
            if hit is not None:
                yield hit


def _enumerate_hits(p: _Pairing, loop: ast.stmt) -> Iterator[Hit]:
    """``for i, name in enumerate(sorted(tasks)):`` whose body reads ``values[i]``, ``values`` in ``tasks``'
    own order: the zip form written with an index."""
    ix = p.ix
    if not (isinstance(loop, ast.For) and isinstance(loop.iter, ast.Call) and ix.qualname(loop.iter.func) == "enumerate"
            and len(loop.iter.args) == 1 and isinstance(loop.target, ast.Tuple) and len(loop.target.elts) == 2
            and isinstance(loop.target.elts[0], ast.Name)):
        return
    coll = p.sorted_of(loop.iter.args[0], loop)
    if coll is None:
        return
    index = loop.target.elts[0].id
    for node in ix.stmts_nodes(loop.body):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Name) and node.slice.id == index \
                and isinstance(node.ctx, ast.Load) and coll in p.in_order_of(node.value, loop) \
                and p.unsorted(coll, loop):
            yield _sorted_hit(ast.unparse(loop.iter.args[0]), ast.unparse(node.value), coll, node)
            return


def _zip_hits(p: _Pairing, call: ast.Call) -> Iterator[Hit]:
    a, b = call.args
    for names, values in ((a, b), (b, a)):
        coll = p.sorted_of(names, call)
        if coll is None or coll not in p.in_order_of(values, call):
            continue
        if not p.unsorted(coll, call):
            continue
        shown = ast.unparse(names) if isinstance(names, ast.Call) else f"{ast.unparse(names)} (sorted({coll}))"
        yield _sorted_hit(shown, ast.unparse(values), coll, call)
        return


def _sorted_hit(shown: str, values: str, coll: str, node: ast.AST) -> Hit:
    return Hit(
        _SLUG, node,
        f"{shown} is paired by position with {values}, whose items come in {coll}'s own order, and {coll} is not "
        "sorted: each value is paired with another item's name (a task's metric reported under another task, a "
        "class's weight given to another class) and nothing fails",
        fix=f"pair the values with {coll} itself, or compute them in the sorted order "
        f"([f(k) for k in sorted({coll})])",
        why="two sequences zipped together must come from one ordering; a sorted copy of a collection and "
        "values computed in its creation order line up only if it was created sorted",
    )


def _is_items(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "items"


def _decimal_sort_hit(p: _Pairing, call: ast.Call) -> Hit | None:
    ix = p.ix
    arg = call.args[0]
    name = _collection(arg)
    if name is None or (isinstance(arg, ast.Call) and isinstance(arg.func, ast.Attribute)
                        and arg.func.attr == "values") or not _decimal_keyed(ix, p.scopes, name, call):
        return None
    items = _is_items(arg)
    parent = ix.parents.get(call)
    positional = False
    if isinstance(parent, ast.Call) and ix.qualname(parent.func) == "dict" and items:
        # d2 = dict(sorted(d.items())) then d2.values() read as a sequence
        stmt = ix.parents.get(parent)
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            target = stmt.targets[0].id
            for node in ix.scope_nodes(ix.enclosing_function(call) or ix.tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                        and node.func.attr == "values" and isinstance(node.func.value, ast.Name) \
                        and node.func.value.id == target and node.lineno > stmt.lineno:
                    positional = True
    elif isinstance(parent, ast.comprehension) and parent.iter is call:
        # a list of the values in key order: items, or d[k] read for each sorted key (a list of the keys
        # alone is a label encoder, consistent wherever it is used)
        comp = ix.parents.get(parent)
        positional = isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and comp.generators[0] is parent and (
            items or any(isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and n.value.id == name
                         for n in ast.walk(comp.elt)))
    elif isinstance(parent, ast.Call) and ix.qualname(parent.func) in ("list", "tuple"):
        positional = items
    if not positional:
        return None
    return Hit(
        _SLUG, call,
        f"{ast.unparse(call)} sorts the decimal string keys of {name} as text ('0', '1', '10', '11', ..., '2') and "
        "its values are then read by position: from eleven keys on, the i-th value is not the value of key i "
        "(class i's prior or weight goes to another class) and nothing fails",
        fix="key the dictionary by the number itself (int(...)), or sort numerically "
        f"(sorted({ast.unparse(arg)}, key={'lambda kv: int(kv[0])' if _is_items(arg) else 'int'}))",
        why="a sequence indexed by class or position must be in numeric order; decimal strings sort "
        "lexicographically",
    )


# -- block-major against item-major: cat(blocks) paired with repeat_interleave(len(blocks)) ------------------

def _factors(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        return _factors(node.left) + _factors(node.right)
    return [node]


def _interleaved(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """``x.repeat_interleave(f, dim=0)`` (or ``torch.repeat_interleave(x, f, dim=0)``; a 1-D ``arange`` may
    leave out ``dim``): the repeat count ``f``."""
    if not isinstance(node, ast.Call):
        return None
    if ix.qualname(node.func) == "torch.repeat_interleave" and node.args:
        base, args = node.args[0], list(node.args[1:])
    elif isinstance(node.func, ast.Attribute) and node.func.attr == "repeat_interleave":
        base, args = node.func.value, list(node.args)
    else:
        return None
    if not args:
        return None
    dim = kwarg(node, "dim") or (args[1] if len(args) > 1 else None)
    if dim is None:
        one_d = isinstance(base, ast.Call) and ix.qualname(base.func) == "torch.arange"
        return args[0] if one_d else None
    return args[0] if isinstance(dim, ast.Constant) and dim.value == 0 else None


def _concatenated(ix: FileIndex, node: ast.AST) -> ast.AST | None:
    """``torch.cat(blocks)`` / ``torch.cat(blocks, dim=0)``: the blocks."""
    if not (isinstance(node, ast.Call) and ix.qualname(node.func) in ("torch.cat", "torch.concat") and node.args):
        return None
    dim = kwarg(node, "dim") or (node.args[1] if len(node.args) > 1 else None)
    if dim is not None and not (isinstance(dim, ast.Constant) and dim.value == 0):
        return None
    return node.args[0]


def _block_count_in(p: _Pairing, factor: ast.AST, blocks: ast.AST, at: ast.AST) -> bool:
    """The repeat count ``factor`` multiplies in the number of concatenated ``blocks`` (``len(blocks)``, or the
    literal list's length itself when the count is a constant)."""
    literal = blocks
    if isinstance(blocks, ast.Name):
        literal = p.scopes.value(blocks.id, at) or blocks
    n = len(literal.elts) if isinstance(literal, (ast.List, ast.Tuple)) else None
    if n is not None and n < 2:
        return False
    parts = _factors(factor)
    for f in parts:
        if isinstance(f, ast.Call) and p.ix.qualname(f.func) == "len" and len(f.args) == 1 \
                and ast.dump(f.args[0]) == ast.dump(blocks):
            return True
    return n is not None and len(parts) == 1 and isinstance(factor, ast.Constant) and factor.value == n


def _layout_hits(p: _Pairing) -> Iterator[Hit]:
    ix = p.ix
    for call in ix.calls:
        named = [a for a in call.args if isinstance(a, ast.Name)]
        if len(named) < 2:
            continue
        resolved = [(a, p.scopes.value(a.id, call)) for a in named]
        inter = [(a, f) for a, v in resolved if v is not None and (f := _interleaved(ix, v)) is not None]
        cats = [(a, b) for a, v in resolved if v is not None and (b := _concatenated(ix, v)) is not None]
        pairs = [(ia, factor, ca, blocks) for ia, factor in inter for ca, blocks in cats
                 if ia is not ca and _block_count_in(p, factor, blocks, call)]
        for ia, factor, ca, blocks in pairs[:1]:
            yield Hit(
                _SLUG, call,
                f"{ia.id} repeats each row {ast.unparse(factor)} times in a row (repeat_interleave: item-major) "
                f"and is paired by position with {ca.id}, the blocks {ast.unparse(blocks)} concatenated one "
                "after the other (block-major): row r of one is not row r of the other, so most rows pair "
                "an item with another item's partner (an anchor with another anchor's positives) and the "
                "loss trains on scrambled pairs without any error",
                fix=f"lay {ia.id} out block by block like {ca.id}: x.repeat_interleave(per_block_count, dim=0)"
                f".repeat(len({ast.unparse(blocks)}), 1), or build both with torch.stack(..., dim=1).flatten(0, 1)",
                why="two tensors paired row by row must come in one layout; torch.cat of n blocks is "
                "block-major, repeat_interleave by n is item-major",
            )


# -- a table re-indexed for a vocabulary by that vocabulary's own positions -----------------------------------

def _position_keyed(p: _Pairing, name: str, at: ast.AST) -> bool:
    """The dictionary ``name`` maps each key to its insertion position: ``d.setdefault(k, len(d))``,
    ``d[k] = len(d)``, ``{k: i for i, k in enumerate(xs)}``."""
    v = p.scopes.value(name, at)
    if isinstance(v, ast.DictComp) and len(v.generators) == 1 and isinstance(v.value, ast.Name):
        gen = v.generators[0]
        if isinstance(gen.iter, ast.Call) and p.ix.qualname(gen.iter.func) == "enumerate" \
                and isinstance(gen.target, ast.Tuple) and len(gen.target.elts) == 2 \
                and isinstance(gen.target.elts[0], ast.Name) and gen.target.elts[0].id == v.value.id \
                and not gen.ifs and len(gen.iter.args) == 1 and not gen.iter.keywords:
            return True
    if not (isinstance(v, ast.Dict) and not v.keys):
        return False

    def is_len(node: ast.AST) -> bool:
        return isinstance(node, ast.Call) and p.ix.qualname(node.func) == "len" and len(node.args) == 1 \
            and isinstance(node.args[0], ast.Name) and node.args[0].id == name

    writes = 0
    for node in nodes(p.ix):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == name:
            if node.func.attr == "setdefault" and len(node.args) == 2:
                if not is_len(node.args[1]):
                    return False
                writes += 1
            elif node.func.attr in ("update", "pop", "popitem", "clear"):
                return False
        elif isinstance(node, ast.Assign) and any(isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name)
                                                  and t.value.id == name for t in node.targets):
            if not is_len(node.value):
                return False
            writes += 1
    return writes > 0


def _embedding_sink(p: _Pairing, node: ast.AST) -> bool:
    """``node`` (a table) is loaded into an embedding: ``from_pretrained(x)``, ``.weight.data.copy_(x)``,
    ``.weight = nn.Parameter(x)``, directly or through one name or ``torch.stack``/``torch.tensor``."""
    ix = p.ix
    cur = node
    for _ in range(3):
        parent = ix.parents.get(cur)
        if isinstance(parent, ast.Call) and cur in parent.args:
            q = ix.qualname(parent.func) or ""
            attr = parent.func.attr if isinstance(parent.func, ast.Attribute) else ""
            if attr == "from_pretrained" or (attr == "copy_" and "weight" in ast.unparse(parent.func.value)):
                return True
            if q in ("torch.stack", "torch.tensor", "torch.as_tensor", "np.array", "numpy.array", "np.stack",
                     "numpy.stack", "torch.nn.Parameter", "torch.FloatTensor", "torch.from_numpy"):
                cur = parent
                continue
            return False
        if isinstance(parent, ast.Assign) and len(parent.targets) == 1:
            target = parent.targets[0]
            if isinstance(target, ast.Attribute) and target.attr == "weight":
                return True
            if isinstance(target, ast.Name):
                scope = ix.enclosing_function(parent) or ix.tree
                for use in ix.scope_nodes(scope):
                    if isinstance(use, ast.Name) and use.id == target.id and isinstance(use.ctx, ast.Load) \
                            and use.lineno > parent.lineno and _embedding_sink_direct(p, use):
                        return True
            return False
        return False
    return False


def _embedding_sink_direct(p: _Pairing, use: ast.Name) -> bool:
    parent = p.ix.parents.get(use)
    if isinstance(parent, ast.Call) and use in parent.args and isinstance(parent.func, ast.Attribute):
        return parent.func.attr == "from_pretrained" or (parent.func.attr == "copy_"
                                                         and "weight" in ast.unparse(parent.func.value))
    if isinstance(parent, ast.Call) and use in parent.args and p.ix.qualname(parent.func) == "torch.nn.Parameter":
        grand = p.ix.parents.get(parent)
        return isinstance(grand, ast.Assign) and any(isinstance(t, ast.Attribute) and t.attr == "weight"
                                                     for t in grand.targets)
    return False


def _reindex_hits(p: _Pairing) -> Iterator[Hit]:
    """``[table[d[k]] for k in d]`` with ``d`` mapping each key to its insertion position: the table's first
    rows in their own order, loaded into an embedding as if looked up word by word."""
    for comp in nodes(p.ix):
        if not (isinstance(comp, (ast.ListComp, ast.GeneratorExp)) and len(comp.generators) == 1):
            continue
        gen = comp.generators[0]
        vocab = _collection(gen.iter)
        if vocab is None or _is_items(gen.iter) or not isinstance(gen.target, ast.Name) or gen.ifs:
            continue
        elt = comp.elt
        if not (isinstance(elt, ast.Subscript) and isinstance(elt.slice, ast.Subscript)
                and isinstance(elt.slice.value, ast.Name) and elt.slice.value.id == vocab
                and isinstance(elt.slice.slice, ast.Name) and elt.slice.slice.id == gen.target.id):
            continue
        if isinstance(gen.iter, ast.Call) and gen.iter.func.attr == "values":  # type: ignore[union-attr]
            continue
        if not _position_keyed(p, vocab, comp) or not _embedding_sink(p, comp):
            continue
        table = ast.unparse(elt.value)
        yield Hit(
            _SLUG, comp,
            f"{ast.unparse(comp)} looks each word up by {vocab}'s own index, and {vocab} numbers its keys in the order "
            f"they were added: the result is {table}'s first len({vocab}) rows in their own order, so each word "
            f"gets the vector of whichever word stood at that row of {table}'s vocabulary, and the embedding "
            "trains on scrambled meanings without any error",
            fix=f"index {table} by its own vocabulary: {table}[pretrained_index[{gen.target.id}]] (the index of "
            f"the word in the vocabulary {table} was built with), with a fresh vector for words it does not have",
            why="a table's rows and a vocabulary's indices pair only when they come from one vocabulary; "
            "re-indexing by the new vocabulary's own positions is the identity",
        )
