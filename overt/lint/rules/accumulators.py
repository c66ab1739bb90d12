"""Plain-Python metric accumulators that are never reset between passes (OVT807 ``accumulator-not-reset``,
issue 33: evaluation code that computes the wrong number).

A number reported once per pass over the data (an epoch's mean loss, a validation accuracy) is a sum over
that pass divided by a count of that pass.  When the sum (``running_loss += loss.item()``, ``correct +=
(pred == y).sum()``, ``losses.append(...)``) is set to zero once, before the loop over passes, and never
again inside it, every pass's number also counts every earlier pass: the curve lags the model, and early
stopping or model selection read stale values (code2seq#112, MichiganCOG/ViP#34, tensorflow/swift-models#633,
KAIST-vilab/OC-CSE#4; w87).  The same holds between two passes of one body: counters filled by the training
loop, read, then filled again by the validation loop without a reset report a validation accuracy that
includes the training batches.

Reported at the per-pass read (a division with the sum as numerator, or as the denominator of another such
sum; ``mean``/``sum`` of an accumulated list) when the accumulator is (1) bound before the loop over passes,
(2) added to inside a loop nested in it, (3) bound nowhere inside the loop over passes (no ``x = 0``, no
``x.clear()``), and (4) read after that inner loop, still inside the loop over passes.  Quiet when the
denominator grows with the passes (``total / (epoch + 1)``: a cumulative mean written on purpose), when a
counter of steps (``+= 1``) is divided by anything but another accumulator (progress, not a metric), and when
the accumulator is a parameter or an attribute (whose resets are not followed), and when the outer loop
iterates a data loader (its iterations are the batches of one pass, not passes: a sum across them, read inside
it, is that pass's running value; session 52, vq-vae-2-pytorch's per-batch sum of the parts all_gather returns).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.units import loader_iter
from overt.lint.index import LOOP_TYPES, FileIndex, dotted, names_in
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.metrics import _strip as _plain  # x.item(), float(x), x.float() -> x

#: calls whose single argument, an accumulated list, is reduced to the pass's number
_REDUCERS = frozenset({"mean", "sum", "average", "median", "fmean", "nanmean"})
_APPENDS = frozenset({"append", "extend"})


def _bound(node: ast.AST) -> set[str]:
    """Plain names (re)bound by a statement: assignments, loop and ``with`` targets, ``del``, ``x.clear()``,
    ``x *= 0``."""
    out: set[str] = set()
    targets: list[ast.AST] = []
    if isinstance(node, ast.Assign):
        targets = list(node.targets)
    elif isinstance(node, (ast.AnnAssign, ast.For, ast.AsyncFor)):
        targets = [node.target]
    elif isinstance(node, ast.withitem) and node.optional_vars is not None:
        targets = [node.optional_vars]
    elif isinstance(node, ast.Delete):
        targets = list(node.targets)
    elif isinstance(node, ast.AugAssign) and not isinstance(node.op, (ast.Add, ast.Sub)):
        targets = [node.target]
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "clear":
        targets = [node.func.value]
    elif isinstance(node, (ast.Global, ast.Nonlocal)):
        out.update(node.names)
    for t in targets:
        for n in ast.walk(t):
            if isinstance(n, ast.Name):
                out.add(n.id)
    return out


def _accumulation(node: ast.AST) -> tuple[str, ast.AST] | None:
    """``(name, what is added)`` for ``name += expr`` or ``name.append(...)`` / ``name.extend(...)``."""
    if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Add) and isinstance(node.target, ast.Name):
        return node.target.id, node.value
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _APPENDS
            and isinstance(node.func.value, ast.Name) and node.args):
        return node.func.value.id, node.args[0]
    return None


def _zero(node: ast.AST | None) -> bool:
    """A start value of a sum or a count: ``0``, ``0.0``, ``[]``, ``list()``, ``torch.zeros(...)``,
    ``torch.tensor(0.)`` (a ``deque(maxlen=k)`` is a window on purpose, not a sum)."""
    if isinstance(node, ast.Constant):
        return node.value == 0 and not isinstance(node.value, bool)
    if isinstance(node, ast.List):
        return not node.elts
    if isinstance(node, ast.Call):
        f = dotted(node.func) or ""
        if f == "list" and not node.args:
            return True
        if f.rsplit(".", 1)[-1] in ("zeros", "tensor") and node.args:
            return f.endswith("zeros") or _zero(node.args[0])
    return False


def _inside(ix: FileIndex, node: ast.AST, region: ast.AST) -> bool:
    return any(a is region for a in ix.ancestors(node))


def _in_body(ix: FileIndex, node: ast.AST, loop: ast.AST) -> bool:
    """Is ``node`` in the body of ``loop`` (not in its ``else:``)?"""
    return any(_inside(ix, node, stmt) or node is stmt for stmt in loop.body)


class _Scope:
    """The facts of one scope (the module or one function) the rule needs."""

    def __init__(self, ix: FileIndex, scope: ast.AST):
        self.ix = ix
        self.nodes = ix.scope_nodes(scope)
        self.params: set[str] = set()
        if isinstance(scope, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = scope.args
            self.params = {p.arg for p in a.posonlyargs + a.args + a.kwonlyargs}
        self.loops = [n for n in self.nodes if isinstance(n, LOOP_TYPES)]
        self.binds: list[tuple[ast.AST, set[str]]] = []
        self.accs: dict[str, list[tuple[ast.AST, ast.AST]]] = {}
        for n in self.nodes:
            names = _bound(n)
            if names:
                self.binds.append((n, names))
            acc = _accumulation(n)
            if acc is not None:
                self.accs.setdefault(acc[0], []).append((n, acc[1]))

    def bound_in(self, name: str, region: ast.AST) -> bool:
        return any(name in names and (n is region or _inside(self.ix, n, region)) for n, names in self.binds
                   if not (isinstance(n, LOOP_TYPES) and n is region))

    def bound_inside(self, loop: ast.AST) -> set[str]:
        """Names bound by the loop or inside it: the batch's values."""
        out: set[str] = set()
        for n, names in self.binds:
            if n is loop or _inside(self.ix, n, loop):
                out |= names
        return out

    def bound_before(self, name: str, region: ast.AST) -> ast.AST | None:
        """The last statement before ``region`` that binds ``name`` to a zero (``x = 0``, ``a = b = 0``,
        ``a, b = 0, 0``, ``x = []``), or None (bound otherwise, or not at all)."""
        last = None
        for n, names in self.binds:
            if name in names and n.lineno < region.lineno and not _inside(self.ix, region, n):
                last = n
        if not isinstance(last, (ast.Assign, ast.AnnAssign)) or last.value is None:
            return None
        value = last.value
        for t in (last.targets if isinstance(last, ast.Assign) else [last.target]):
            if isinstance(t, ast.Tuple) and isinstance(value, ast.Tuple) and len(t.elts) == len(value.elts):
                for e, v in zip(t.elts, value.elts):
                    if isinstance(e, ast.Name) and e.id == name:
                        return last if _zero(v) else None
        return last if _zero(value) else None


def _reads(ix: FileIndex, sc: _Scope, name: str, region: ast.AST) -> Iterator[tuple[ast.AST, ast.AST | None]]:
    """Per-pass reads of ``name`` inside ``region``: ``(the read, the other side of its division or None)``."""
    for n in ix.stmts_nodes(region.body) if isinstance(region, LOOP_TYPES) else []:
        if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv)):
            left, right = _plain(n.left), _plain(n.right)
            if _numerator_is(n.left, name):
                yield n, n.right
            elif isinstance(right, ast.Name) and right.id == name and isinstance(left, ast.Name) \
                    and left.id in sc.accs and left.id != name:
                yield n, None
        elif isinstance(n, ast.Call) and len(n.args) == 1 and not n.keywords and isinstance(n.args[0], ast.Name) \
                and n.args[0].id == name and (dotted(n.func) or "").rsplit(".", 1)[-1] in _REDUCERS \
                and any(isinstance(e, ast.Call) for e, _ in sc.accs.get(name, [])):
            yield n, None


def _outer_names(loop: ast.AST) -> set[str]:
    """The names a loop over passes counts with: its target (``epoch``), its test's names (``while step <``)."""
    if isinstance(loop, (ast.For, ast.AsyncFor)):
        return names_in(loop.target)
    return names_in(loop.test) if isinstance(loop, ast.While) else set()


def _hits_across_passes(ix: FileIndex, sc: _Scope) -> Iterator[Hit]:
    seen: set[tuple[str, int]] = set()
    for name, events in sc.accs.items():
        if name in sc.params:
            continue
        for outer in sc.loops:
            if isinstance(outer, (ast.For, ast.AsyncFor)) and loader_iter(ix, outer.iter):
                continue  # its iterations are the batches of one pass: a sum across them is that pass's own
            inner_events = [(e, added) for e, added in events if _inside(ix, e, outer) and any(
                lp is not outer and _inside(ix, lp, outer) for lp in ix.enclosing_loops(e))]
            if not inner_events or sc.bound_in(name, outer):
                continue
            init = sc.bound_before(name, outer)
            if init is None:
                continue
            first = inner_events[0][0]
            inner = next(lp for lp in ix.enclosing_loops(first) if lp is not outer and _inside(ix, lp, outer))
            per_batch = sc.bound_inside(inner)
            by_constant = not any(names_in(added) & per_batch for _, added in inner_events)
            counting = _outer_names(outer) | {n for n, evs in sc.accs.items()
                                              if any(_inside(ix, e, outer) and not any(
                                                  lp is not outer and _inside(ix, lp, outer)
                                                  for lp in ix.enclosing_loops(e)) for e, _ in evs)}
            for read, other in _reads(ix, sc, name, outer):
                if any(_in_body(ix, read, lp) for e, _ in inner_events for lp in ix.enclosing_loops(e)
                       if lp is not outer and _inside(ix, lp, outer)):
                    continue  # a running value inside the loop of updates
                if read.lineno < inner.lineno:
                    continue
                if other is not None:
                    other_names = names_in(other)
                    if other_names & counting:
                        continue  # divided by the number of passes so far: a cumulative mean on purpose
                    if by_constant and not (other_names & set(sc.accs)):
                        continue  # a step counter over a fixed total: progress, not a metric
                if (name, outer.lineno) in seen:
                    break
                seen.add((name, outer.lineno))
                yield Hit("accumulator-not-reset", read,
                          f"'{name}' is set once (line {init.lineno}), before the loop at line {outer.lineno}, "
                          f"added to batch by batch in the loop at line {inner.lineno} and read once per pass here, "
                          f"but never set back inside the loop at line {outer.lineno}: every pass's value also "
                          f"counts all the earlier passes, so the number reported lags the model (and early stopping "
                          f"or model selection read it)",
                          fix=f"set {name} back to its start value at the top of each pass (inside the loop at line "
                              f"{outer.lineno}, before line {inner.lineno})")
                break


def _hits_between_loops(ix: FileIndex, sc: _Scope) -> Iterator[Hit]:
    """Two loops of one body add to the same accumulator, read after the first and after the second, with no
    reset between: the second pass's number includes the first pass's batches (training counts in the
    validation accuracy)."""
    for name, events in sc.accs.items():
        if name in sc.params:
            continue
        holders = [lp for lp in sc.loops if any(_inside(ix, e, lp) for e, _ in events)]
        for i, a in enumerate(holders):
            chain = ix.enclosing_loops(a)
            later = [b for b in holders[i + 1:] if b.lineno > a.end_lineno and ix.enclosing_loops(b) == chain]
            if not later:
                continue
            b = later[0]
            if any(name in names and a.end_lineno < n.lineno < b.lineno for n, names in sc.binds):
                continue
            end = chain[0].end_lineno if chain else float("inf")
            reads = [r for r in _division_reads(sc, name) if ix.enclosing_loops(r) == chain]
            first = [r for r in reads if a.end_lineno < r.lineno < b.lineno]
            second = [r for r in reads if b.end_lineno < r.lineno <= end]
            if first and second:
                yield Hit("accumulator-not-reset", second[0],
                          f"'{name}' is added to by the loop at line {a.lineno}, read after it (line "
                          f"{first[0].lineno}), then added to again by the loop at line {b.lineno} and read here "
                          f"without being set back in between: this pass's number also counts the first loop's "
                          f"batches",
                          fix=f"set {name} back to its start value before the loop at line {b.lineno} (or give each "
                              f"loop its own accumulator)")
                break


def _division_reads(sc: _Scope, name: str) -> list[ast.BinOp]:
    """Divisions in the scope whose numerator is ``name`` (``name / n``, ``100 * name / n``)."""
    return [n for n in sc.nodes if isinstance(n, ast.BinOp) and isinstance(n.op, (ast.Div, ast.FloorDiv))
            and _numerator_is(n.left, name)]


def _numerator_is(node: ast.AST, name: str) -> bool:
    node = _plain(node)
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
        if isinstance(node.left, ast.Constant):
            node = _plain(node.right)
        elif isinstance(node.right, ast.Constant):
            node = _plain(node.left)
    return isinstance(node, ast.Name) and node.id == name


@rule("accumulator-not-reset")
def accumulator_not_reset(ix: FileIndex) -> Iterator[Hit]:
    """Plain accumulators of a per-pass metric bound once before the loop over passes and never reset in it."""
    scopes: list[ast.AST] = [ix.tree] + [f for fs in ix.functions.values() for f in fs]
    for scope in scopes:
        sc = _Scope(ix, scope)
        if not sc.accs:
            continue
        found = False
        for hit in _hits_across_passes(ix, sc):
            found = True
            yield hit
        if not found:
            yield from _hits_between_loops(ix, sc)
