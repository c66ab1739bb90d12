"""Guard on feature columns that hold one value per row (slug ``feature-columns-collapsed``; issue 33, branch
features19: a derived feature keeps the information its inputs had).

The premise: the columns of a feature matrix a program builds for its model each carry their own quantity (one
per coefficient, channel, position or field), so across a batch they differ from each other wherever they vary
at all.  Several columns that are equal to each other in every row while they vary richly across rows carry one
number copied: a reduction taken over every axis, or over the wrong one, and broadcast back to the feature's shape
(delta features summed with ``np.sum(taps)`` instead of ``np.sum(taps, axis=0)``:
nationalparkservice/acoustic_discovery#15; a ``mean()`` with no ``dim`` assigned into a per-column slot).  The
information that told the columns apart is gone before the model sees it, and nothing fails.

What is proven, once per model, on its first checked training forward whose first tensor argument is a
floating-point ``(rows, features)`` tensor with at least :data:`MIN_ROWS` rows and :data:`MIN_COLS` (at most
:data:`MAX_COLS`) features that does not require a gradient (an input, not another model's output), on its first
:data:`MAX_ROWS` rows: the columns are ordered by a fixed weighting
of their rows, each column is compared exactly with the next in that order, and the number of distinct values of
each column is counted (queued as one device tensor, read with the next checked step's values).  Reported when
:data:`MIN_GROUP` or more columns are equal on every row and each takes at least :data:`MIN_DISTINCT` distinct
values and half as many as there are rows.

Silent: equal columns that are not :data:`MIN_GROUP` adjacent ones, or that hold their row's lowest or highest value
on every row (blank pixels or padding after a per-sample standardisation: equal before the transform); columns
constant over the batch or with few values (padding, one-hot codes, sparse pixels: they can be
equal by design or by chance); two equal columns (a dataset may hold a duplicated field); inputs of more or fewer
than two dimensions (an image repeated over three channels is a grey image given to an RGB model); inputs that
require a gradient.  Only the first checked forward of each model is looked at.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MIN_ROWS = 16  # rows of the input: equal columns by chance over this many rich rows are impossible
MIN_COLS = 6  # features of the input
MIN_GROUP = 3  # columns equal to each other on every row
MIN_DISTINCT = 8  # distinct values each of them takes across the rows (and at least half the rows)
MAX_ROWS = 512  # rows compared (the first ones): equal on these many rich rows is already no accident
MAX_COLS = 1 << 16  # wider inputs (hashed features, vocabularies) are not judged


def _input(args: tuple) -> torch.Tensor | None:
    """The first tensor argument when it is a floating-point ``(rows, features)`` input large enough to judge."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is None or x.dim() != 2 or not x.is_floating_point() or x.requires_grad or x.device.type == "meta" \
            or x.layout != torch.strided:
        return None
    if x.shape[0] < MIN_ROWS or x.shape[1] < MIN_COLS or x.shape[1] > MAX_COLS:
        return None
    return x


def _ranges(cols: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out: list[str] = []
    start = prev = cols[0]
    for c in cols[1:]:
        if c == prev + 1:
            prev = c
            continue
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
        start = prev = c
    out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def groups(order: list[int], equal: list[float], distinct: list[float], rows: int,
           extreme: list[float] | None = None) -> list[list[int]]:
    """The runs of at least :data:`MIN_GROUP` adjacent columns equal on every row, each column rich in values and
    not at its row's lowest or highest value on every row.

    ``order``: the columns in hash order; ``equal[k]``: whether ``order[k]`` and ``order[k + 1]`` are equal on
    every row; ``distinct[c]``: the distinct values of column ``c``; ``extreme[c]``: whether column ``c`` holds
    its row's lowest or highest value on every row.  A feature block built by one reduction broadcast back is
    adjacent; equal columns scattered over the input, or at the rows' extremes, are input values that were equal
    before a per-row transform (blank pixels standardised per sample): they prove no loss."""
    need = max(MIN_DISTINCT, rows // 2)
    found: list[list[int]] = []
    run = [order[0]]
    for k in range(len(equal)):
        if equal[k]:
            run.append(order[k + 1])
            continue
        found.append(run)
        run = [order[k + 1]]
    found.append(run)
    out: list[list[int]] = []
    for g in found:
        cols = sorted(c for c in g if distinct[c] >= need and not (extreme and extreme[c]))
        start = 0
        for i in range(1, len(cols) + 1):
            if i == len(cols) or cols[i] != cols[i - 1] + 1:
                if i - start >= MIN_GROUP:
                    out.append(cols[start:i])
                start = i
    return out


class SameColumnChecks(Check):
    name = "samecolumns"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[int] = set()  # id(ModelInfo) judged

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.done or not args:
            return
        x = _input(args)
        if x is None:
            return
        self.done.add(id(info))
        with torch.no_grad():
            xf = x.detach()[:MAX_ROWS].float()
            rows, cols = xf.shape
            w = torch.cos(torch.arange(rows, device=xf.device, dtype=torch.float32) * 1.7 + 0.3)
            order = (w @ xf).argsort()
            ordered = xf[:, order]
            equal = ordered[:, 1:].eq(ordered[:, :-1]).all(0)
            s = xf.sort(0).values
            distinct = s[1:].ne(s[:-1]).sum(0) + 1
            # a column at its row's lowest (or highest) value on every row: a background or padding value that a
            # per-row transform moved with the row (digits' always-blank pixels after a per-sample standardisation)
            extreme = xf.eq(xf.amin(1, keepdim=True)).all(0) | xf.eq(xf.amax(1, keepdim=True)).all(0)
            value = torch.cat([order.float(), equal.float(), distinct.float(), extreme.float()])
        where = user_location(2)
        self.s.defer(value, lambda v: self._judge(info, v, rows, cols, where))

    def _judge(self, info: ModelInfo, values: list[float], rows: int, cols: int, where: str | None) -> None:
        order = [int(v) for v in values[:cols]]
        equal = values[cols:2 * cols - 1]
        distinct = values[2 * cols - 1:3 * cols - 1]
        extreme = values[3 * cols - 1:]
        found = groups(order, equal, distinct, rows, extreme)
        if not found:
            return
        found.sort(key=lambda g: g[0])
        named = "; ".join(f"columns {_ranges(g)}" for g in found)
        n = sum(len(g) for g in found)
        least = int(min(distinct[c] for g in found for c in g))
        self.s.report(
            "feature-columns-collapsed",
            f"{n} of the {cols} input columns of {info.name} collapse to {len(found)} value(s) per row ({named}: "
            f"the columns of each group are equal on every one of the {rows} rows of a training batch, while each "
            f"takes at least {least} distinct values across the rows). Columns meant to carry one quantity each "
            "(a coefficient, a channel, a position) that come out equal carry one number copied: a reduction over "
            "every axis, or over the wrong one, broadcast back to the feature's shape (np.sum(taps) for "
            "np.sum(taps, axis=0), a mean() without its dim). What told the columns apart is lost before the model "
            "sees it, and nothing fails.",
            fix="give the reduction that builds these features its axis (np.sum(x, axis=0), x.mean(dim=1)) so "
            "that each column keeps its own value; if the columns are one value on purpose, pass it once.",
            where=where or "", key=info.name,
        )
