"""Optimizer steps counted from the number of samples (OVT133 ``steps-counted-from-samples``, issue 33).

A training length or a schedule's horizon is a number of optimizer steps, and an epoch of a
``DataLoader`` with ``batch_size=B`` is ``ceil(len(dataset) / B)`` steps (divided again by the
accumulation window).  Counted with ``len(dataset)`` and no batch size, an epoch is B times too long:
``max_steps / steps_per_epoch`` gives too few epochs and the run stops after a small part of the
steps asked for (huggingface/finetrainers#37), and a horizon ``len(dataset) * epochs`` lays a
warm-up or a decay out over B times more steps than the run takes.

The rule: ``len(D)`` (or ``len(loader.dataset)``) where ``D`` is a data set this file gives to a
``DataLoader`` whose ``batch_size`` is written and is neither 1 nor None, inside an expression that
mentions no batch size (no name saying batch/bs/bsz, not the loader's batch-size name) and no
loader length, and whose value is a step count: it is assigned to a name that says step, iteration
or update (``steps_per_epoch``, ``num_training_steps``, ``total_iters``), or given as a scheduler's
horizon (``T_max``, ``total_steps``, ``steps_per_epoch``, ``num_training_steps``,
``num_warmup_steps``, ``total_iters``, ``max_iter``...).  Quiet on loaders without a batch size (1 by
default: a sample is a step), on ``batch_size=None`` (the data set yields batches), and on sample
counts kept under other names (``n_train = len(train_ds)``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, kwarg
from overt.lint.rules.base import Hit, rule

_STEPS_NAME = re.compile(r"(^|_)(steps?|iters?|iterations?|updates?)($|_)|steps|iters|updates", re.I)
_BATCH_NAME = re.compile(r"batch|(^|_)(bs|bsz|mbs)($|_)", re.I)
_HORIZON = {"T_max", "total_steps", "steps_per_epoch", "num_training_steps", "num_warmup_steps",
            "total_iters", "max_iter", "max_iters", "max_steps", "warmup_steps", "decay_steps", "T_0",
            "num_steps", "t_total"}


def _datasets(ix: FileIndex) -> dict[str, ast.expr]:
    """Data set name -> the batch-size expression of a DataLoader that batches it (more than one sample)."""
    out: dict[str, ast.expr] = {}
    unbatched: set[str] = set()
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if q.rsplit(".", 1)[-1] != "DataLoader":
            continue
        ds = call.args[0] if call.args else kwarg(call, "dataset")
        bs = call.args[1] if len(call.args) > 1 else kwarg(call, "batch_size")
        name = dotted(ds)
        if name is None:
            continue
        if bs is None or isinstance(bs, ast.Constant) and (bs.value is None or bs.value == 1):
            unbatched.add(name)  # default batch_size=1 (a sample is a step), or a data set of batches
            continue
        out[name] = bs
        for loader in [n for n, c in ix.loaders.items() if c is call]:
            out[f"{loader}.dataset"] = bs
    return {name: bs for name, bs in out.items() if name not in unbatched}


def _counts_samples(node: ast.Call, ix: FileIndex, datasets: dict[str, ast.expr]) -> ast.expr | None:
    """The batch size of ``node`` = ``len(D)`` of a batched data set ``D``, else None."""
    if dotted(node.func) != "len" or len(node.args) != 1:
        return None
    return datasets.get(dotted(node.args[0]) or "")


def _mentions_batch(expr: ast.AST, bs: ast.expr, ix: FileIndex) -> bool:
    whole = dotted(bs)
    bs_names = {whole, whole.rsplit(".", 1)[-1]} if whole else set()
    for sub in ast.walk(expr):
        name = dotted(sub) if isinstance(sub, (ast.Name, ast.Attribute)) else None
        if name and (_BATCH_NAME.search(name) or name in bs_names or name.rsplit(".", 1)[-1] in bs_names):
            return True
        parent = ix.parents.get(sub)
        if isinstance(sub, ast.Constant) and isinstance(bs, ast.Constant) and sub.value == bs.value \
                and isinstance(parent, ast.BinOp) and isinstance(parent.op, (ast.Div, ast.FloorDiv)):
            return True
        if isinstance(sub, ast.Call) and dotted(sub.func) == "len" and sub.args \
                and (dotted(sub.args[0]) or "") in ix.loaders:
            return True
    return False


def _consumer(node: ast.AST, ix: FileIndex) -> tuple[ast.AST, ast.AST, str] | None:
    """(the whole expression, the statement, what it sets) when ``node`` feeds a step count."""
    expr = node
    while True:
        parent = ix.parents.get(expr)
        if isinstance(parent, (ast.BinOp, ast.UnaryOp)) or (
                isinstance(parent, ast.Call) and expr in parent.args
                and (dotted(parent.func) or "").rsplit(".", 1)[-1] in ("ceil", "floor", "int", "round", "max")):
            expr = parent
            continue
        break
    if isinstance(parent, ast.keyword) and parent.arg in _HORIZON:
        call = ix.parents.get(parent)
        if isinstance(call, ast.Call):
            return expr, expr, f"{parent.arg}="
    if isinstance(parent, (ast.Assign, ast.AnnAssign)) and parent.value is expr:
        targets = parent.targets if isinstance(parent, ast.Assign) else [parent.target]
        for t in targets:
            name = dotted(t)
            if name and _STEPS_NAME.search(name.rsplit(".", 1)[-1]) and not _BATCH_NAME.search(name):
                return expr, parent, name
    return None


@rule("steps-counted-from-samples")
def steps_counted_from_samples(ix: FileIndex) -> Iterator[Hit]:
    datasets = _datasets(ix)
    if not datasets:
        return
    for call in ix.calls:
        bs = _counts_samples(call, ix, datasets)
        if bs is None:
            continue
        found = _consumer(call, ix)
        if found is None:
            continue
        expr, stmt, sets = found
        if _mentions_batch(expr, bs, ix):
            continue
        ds = ix.segment(call.args[0])
        batch = ix.segment(bs)
        yield Hit("steps-counted-from-samples", stmt,
                  f"`{ix.segment(expr)}` sets `{sets}` from the number of samples in `{ds}`, which its DataLoader "
                  f"batches by {batch}: an epoch is len(loader) = ceil(len({ds}) / {batch}) optimizer steps, so "
                  f"this count is {batch} times too many per epoch (the run stops after a fraction of the steps "
                  "asked for, or the schedule is laid out over far more steps than the run takes)",
                  fix=f"count batches: len(train_loader) (or math.ceil(len({ds}) / {batch})), divided by the "
                  "accumulation steps where there are any")
