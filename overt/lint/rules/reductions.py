"""A value summed over the ranks twice (OVT809 ``metric-reduced-twice``, issue 33: distributed metric
reductions done twice).

An all-reduce with ``SUM`` gives every rank the sum over the ranks; summed again, the value is
``world_size`` times the sum, and a metric divided by the world size once reports ``world_size``
times the real one (Lightning-AI/pytorch-lightning#3713: a metric already synced with
``ReduceOp.SUM`` all-reduced again in ``test_epoch_end``, accuracy 22.3 and 714.7; #2795; w91).

Reported when, in one function (or at module level), a summing reduction is applied to a value that
already is the result of one, with no new value bound in between: ``dist.all_reduce(t)`` twice on
the same tensor (in place, ``SUM`` by default), or ``y = reduce(x)`` followed by ``reduce(y)`` where
the reduction is ``dist.all_reduce`` / ``accelerator.reduce(..., "sum")`` or a function of the file
whose name says it all-reduces with a sum (``all_reduce_sum``, ``reduce_sum``).  Quiet for averaging
reductions (an average of equal values is the value: ``ReduceOp.AVG``, ``reduce_mean``), an operation
given by a variable, reductions over a given process group (a sum over the tensor-parallel group then
over the data-parallel one is right), a reduction in a loop (one per item), and across functions
(which call reaches which is not followed).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg, tokens
from overt.lint.rules.base import Hit, rule


def _summing(ix: FileIndex, call: ast.Call) -> bool:
    """Is ``call`` a reduction over the ranks that sums?"""
    name = dotted(call.func) or ""
    last = name.rsplit(".", 1)[-1]
    words = set(tokens(last))
    if last == "all_reduce" and (kwarg(call, "group") is not None or len(call.args) > 2):
        return False  # a reduction over a given group: hierarchical reductions over several groups are right
    op = (kwarg(call, "op") or kwarg(call, "reduceOp")) if last == "all_reduce" else None
    if op is None and last == "all_reduce" and len(call.args) > 1:
        op = call.args[1]
    if op is not None:
        return (dotted(op) or "").rsplit(".", 1)[-1].upper() == "SUM"
    if last == "all_reduce":
        return True  # SUM is the default
    if last == "reduce" and name.startswith(("accelerator.", "self.accelerator.")):
        how = kwarg(call, "reduction") or (call.args[1] if len(call.args) > 1 else None)
        return isinstance(how, ast.Constant) and how.value == "sum"
    if last in ix.functions and {"reduce", "sum"} <= words | ({"reduce"} if "allreduce" in last else set()):
        return not words & {"mean", "avg", "average"}
    return False


def _subject(call: ast.Call) -> str | None:
    return dotted(call.args[0]) if call.args else None


@rule("metric-reduced-twice")
def metric_reduced_twice(ix: FileIndex) -> Iterator[Hit]:
    scopes: list[ast.AST] = [ix.tree] + [f for fs in ix.functions.values() for f in fs]
    for scope in scopes:
        reduced: dict[str, ast.Call] = {}  # name -> the summing reduction that produced it (or reduced it in place)
        for node in ix.scope_nodes(scope):
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
                value = node.value
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names = [dotted(t) for t in targets]
                if isinstance(value, ast.Call) and _summing(ix, value) and not ix.enclosing_loops(value):
                    src = _subject(value)
                    if src in reduced and not _exclusive(ix, reduced[src], value):
                        yield _hit(value, src, reduced[src])
                        reduced.clear()
                        continue
                    for n in names:
                        if n:
                            reduced[n] = value
                else:
                    for n in names:
                        reduced.pop(n or "", None)
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and _summing(ix, node.value) \
                    and (dotted(node.value.func) or "").endswith("all_reduce") \
                    and not ix.enclosing_loops(node.value):
                src = _subject(node.value)
                if src is None:
                    continue
                if src in reduced and not _exclusive(ix, reduced[src], node.value):
                    yield _hit(node.value, src, reduced[src])
                    reduced.clear()
                    continue
                reduced[src] = node.value  # in place: the tensor now holds the sum


def _exclusive(ix: FileIndex, a: ast.AST, b: ast.AST) -> bool:
    """Are ``a`` and ``b`` in the two branches of one ``if`` (only one of them runs)?"""
    for anc in ix.ancestors(a):
        if isinstance(anc, ast.If) and any(b is n for n in ast.walk(anc)):
            in_body = [any(x is n for st in anc.body for n in ast.walk(st)) for x in (a, b)]
            return in_body[0] != in_body[1]
    return False


def _hit(call: ast.Call, name: str, first: ast.Call) -> Hit:
    return Hit("metric-reduced-twice", call,
               f"'{name}' already holds a sum over the ranks (line {first.lineno}) and is summed over the ranks "
               f"again here: every rank now holds world_size times the sum, so a metric divided by the world size "
               f"once is world_size times too large (a metric that syncs itself, then an all-reduce in the epoch-end "
               f"code)",
               fix=f"reduce once: drop this all-reduce (the value at line {first.lineno} is already the sum), or "
                   f"reduce the per-rank value, not the reduced one")
