"""Guard on input columns a model never reads while its reads of the others overlap (slug
``input-columns-unread``; issue 33, branch embrows14).

The premise: every feature a program hands its model reaches the model's output.  A correct model may leave a
column out on purpose (an id column, a target packed beside the features), but a model whose code reads the
same columns more than once -- one part per encoder, one slice per column group -- while a large share of the
columns that vary across the batch reaches no output has lost them: a slice offset that is never advanced
(every group reads the first group's columns: pytorch-frame#455), an offset advanced by one instead of the
group's width, a loop index that is never used, a width changed in one place and not the other.  The features
the labels depend on are then never learnt from, and nothing fails.

What is proven, once per model, on its first checked training forward whose first argument is a floating-point
``(rows, features)`` or ``(rows, positions, features)`` tensor or an integer ``(rows, columns)`` one with at least :data:`MIN_ROWS` rows and
:data:`MIN_COLS` features: the forward is run again (as the user's code, under ``enable_grad``, the model's
random generators, buffers and attributes put back after, the sessions' loss wrappers told nothing of the loss
calls it makes) on a copy of that input that requires a gradient;
a fixed, non-constant weighting of every floating-point output is differentiated with respect to the copy
(``torch.autograd.grad``: no parameter's ``.grad`` is touched).  A column whose gradient is exactly zero on every
row (and position) reaches no output.  An integer input (category or token ids, ``(rows, columns)``) has no
gradient: there the columns that no slice selects are shifted by one row (each column keeps its own values, so an
id stays a valid id) and the forward run again with the same random draws; outputs equal to the first run's
prove that those columns reach none of them.  While the forward runs, a function mode records each slice of the input
(``x[...]``, ``narrow``) with the columns it selects and the user's line.  Reported when at least two varying
columns and a quarter of the varying columns are unread, no slice selects an unread column, and two slices
select overlapping columns (the same part read twice).  The two flags (read, varying) are queued as one device
tensor and read with the next checked step's values: nothing is synchronised here.

Silent: a model that reads every column (including ``x @ W``, a convolution, a full ``Linear``); an input read
whole or only once per column; columns constant over the batch (nothing to learn from them); images and other
inputs of more than three dimensions; a forward that cannot be run again on the arguments it got (keyword
arguments the hook does not see with no default); outputs with no gradient path (integer outputs).
"""

from __future__ import annotations

import linecache
import math
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from overt.guards.check import Check
from overt.guards.putback import ModelState
from overt.guards.rerun import rerun
from overt.guards.samerows import tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MIN_ROWS = 16  # rows of the probed input (a column unread by chance on every row is then impossible)
MIN_COLS = 4  # features of the probed input
MIN_UNREAD = 2  # varying columns that reach no output
UNREAD_SHARE = 0.25  # ... and at least this share of the varying columns
MAX_READS = 64  # slices of the input recorded per probe

_SLICES = {torch.Tensor.__getitem__, torch.Tensor.narrow, torch.narrow}


def _plain_key(key: Any) -> bool:
    """Whether an index holds no tensor (a slice, an int, None, Ellipsis or tuples of them)."""
    if isinstance(key, tuple):
        return all(_plain_key(k) for k in key)
    return key is None or key is Ellipsis or isinstance(key, (int, slice))


class _Reads(TorchFunctionMode):
    """Records each slice of one tensor taken while it is on: the columns (last axis) it selects and the user's
    line that took it."""

    def __init__(self, x: torch.Tensor):
        super().__init__()
        self.x = x
        self.tags = torch.arange(x.shape[-1]).expand(tuple(x.shape))  # column index of each element (a view)
        self.reads: list[tuple[frozenset[int], str | None]] = []

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        if func in _SLICES and args and args[0] is self.x and len(self.reads) < MAX_READS:
            cols = None
            try:
                if func is torch.Tensor.__getitem__:
                    if len(args) > 1 and _plain_key(args[1]):
                        cols = self.tags[args[1]]
                else:
                    cols = torch.narrow(self.tags, *args[1:], **kwargs)
            except Exception:  # noqa: BLE001  an index the tags cannot take: not recorded
                cols = None
            if cols is not None and cols.numel():
                self.reads.append((frozenset(cols.unique().tolist()), user_location(2)))
        return func(*args, **kwargs)


def _ranges(cols: list[int]) -> str:
    """``[0, 1, 2, 5]`` -> ``"0-2, 5"``."""
    out: list[str] = []
    start = prev = None
    for c in cols:
        if start is None:
            start = prev = c
        elif c == prev + 1:
            prev = c
        else:
            out.append(f"{start}-{prev}" if prev != start else f"{start}")
            start = prev = c
    if start is not None:
        out.append(f"{start}-{prev}" if prev != start else f"{start}")
    return ", ".join(out)


def _code(where: str | None) -> str:
    """`` (`the line's code`)`` for a ``file.py:LINE`` location, or nothing when the file cannot be read."""
    if not where or ":" not in where:
        return ""
    path, _, line = where.rpartition(":")
    text = linecache.getline(path, int(line)).strip() if line.isdigit() else ""
    return f" (`{text}`)" if text else ""


def _weights(t: torch.Tensor) -> torch.Tensor:
    """A fixed, non-constant weighting of ``t``'s elements (no random generator drawn from)."""
    n = t.numel()
    return torch.cos(torch.arange(n, device=t.device, dtype=torch.float32) * 1.7 + 0.3).reshape(t.shape)


def _probed(args: tuple) -> torch.Tensor | None:
    """The first tensor argument, when it is a ``(rows, features)`` or ``(rows, positions, features)``
    floating-point tensor or a ``(rows, columns)`` integer tensor of at least :data:`MIN_ROWS` rows and
    :data:`MIN_COLS` columns."""
    x = next((a for a in args if isinstance(a, torch.Tensor)), None)
    if x is None or x.dim() < 2 or x.shape[0] < MIN_ROWS or x.shape[-1] < MIN_COLS:
        return None
    if x.is_floating_point():
        return x if x.dim() <= 3 else None
    if x.dtype in (torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8) and x.dim() == 2:
        return x
    return None


def _overlap(slices: list) -> tuple[frozenset[int], str | None] | None:
    """The columns two slices both select and the line of the first, or None when no two overlap."""
    for i, (a, where_a) in enumerate(slices):
        for b, where_b in slices[i + 1:]:
            if a & b:
                return a & b, where_a or where_b
    return None


class InputReachChecks(Check):
    name = "inputreach"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[int] = set()  # id(ModelInfo) probed (or found not eligible for good)
        self.pending: dict[int, tuple] = {}  # id(ModelInfo) -> the args of the checked forward now running

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.done or not args:
            return
        x = _probed(args)
        if x is None or x.requires_grad or x.device.type == "meta":
            return  # (an input that requires a gradient is another model's output: its columns are that model's)
        self.pending[id(info)] = args

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        args = self.pending.pop(id(info), None)
        if args is None or failed:
            return
        self.done.add(id(info))
        x = _probed(args)
        if x is None:
            return
        try:
            with rerun(info.module, info.param_device) as saved:
                if x.is_floating_point():
                    self._gradient_probe(info, args, x)
                else:
                    self._shuffle_probe(info, args, x, saved)
        except Exception:  # noqa: BLE001  a forward that cannot run again on these arguments: silent
            return

    def _gradient_probe(self, info: ModelInfo, args: tuple, x: torch.Tensor) -> None:
        """A floating-point input: the columns with no gradient from a weighting of the outputs."""
        xp = x.detach().clone().requires_grad_(True)
        reads = _Reads(xp)
        with torch.enable_grad():
            with reads:
                out = info.module.forward(*(xp if a is x else a for a in args))
            outs = [t for t in tensors(out) if t.is_floating_point() and t.requires_grad and t.numel()]
            if not outs:
                return
            proj = sum((t.float() * _weights(t)).sum() for t in outs)
            (gx,) = torch.autograd.grad(proj, xp, allow_unused=True)
        if gx is None:
            return  # the input reaches no output at all: an argument the model ignores, not a lost column
        cols = x.shape[-1]
        read = gx.detach().reshape(-1, cols).ne(0).any(0)
        self._queue(info, x, read, reads.reads)

    def _shuffle_probe(self, info: ModelInfo, args: tuple, x: torch.Tensor, saved: ModelState) -> None:
        """An integer input (category or token ids, ``(rows, columns)``): the columns no slice selects are shifted
        by one row (each keeps its own values) and the forward run again with the same random draws; unchanged
        outputs prove those columns reach none of them."""
        reads = _Reads(x)
        with torch.no_grad():
            with reads:
                first = info.module.forward(*args)
            cols = x.shape[-1]
            chosen = set().union(*(c for c, _ in reads.reads)) if reads.reads else set()
            others = [j for j in range(cols) if j not in chosen]
            if len(others) < MIN_UNREAD or not _overlap(reads.reads):
                return
            moved = x.clone()
            index = torch.tensor(others, device=x.device)
            moved[:, index] = x[:, index].roll(1, 0)
            saved.restore()
            saved.restore_rng()
            second = info.module.forward(*(moved if a is x else a for a in args))
        a = [t for t in tensors(first) if t.is_floating_point()]
        b = [t for t in tensors(second) if t.is_floating_point()]
        if not a or len(a) != len(b) or any(p.shape != q.shape for p, q in zip(a, b)):
            return
        same = torch.stack([p.eq(q).all() for p, q in zip(a, b)]).all()
        read = torch.ones(cols, dtype=torch.bool, device=x.device)
        read[index] = ~same  # the shifted columns are unread when no output moved
        self._queue(info, x, read, reads.reads)

    def _queue(self, info: ModelInfo, x: torch.Tensor, read: torch.Tensor, slices: list) -> None:
        cols = x.shape[-1]
        flat = x.detach().reshape(-1, cols)
        varying = flat.amax(0).ne(flat.amin(0))
        rows = x.shape[0]
        slices = list(slices)
        self.s.defer(torch.cat([read, varying]).float(),
                     lambda values: self._judge(info, values[:cols], values[cols:], slices, rows))

    def _judge(self, info: ModelInfo, read: list[float], varying: list[float], slices: list, rows: int) -> None:
        vary = [j for j, v in enumerate(varying) if v]
        unread = [j for j in vary if not read[j]]
        if len(unread) < MIN_UNREAD or len(unread) < math.ceil(UNREAD_SHARE * len(vary)):
            return
        lost = set(unread)
        if any(cols & lost for cols, _ in slices):
            return  # a slice selects a column that reaches nothing: the column is read and discarded, not missed
        overlap = _overlap(slices)
        if overlap is None:
            return
        common, where = overlap
        times = sum(1 for cols, _ in slices if common <= cols)
        self.s.report(
            "input-columns-unread",
            f"columns {_ranges(unread)} of {info.name}'s input ({len(unread)} of the {len(vary)} columns that vary "
            f"across the batch) reach none of its outputs: no gradient flows to them from any output, on any of the "
            f"{rows} rows of a training batch, while the forward reads columns {_ranges(sorted(common))} "
            f"{times} times (slices of the input at {where}{_code(where)}). The program hands the model features it never uses "
            "and uses others several times: a slice offset that is not advanced (every part reads the first "
            "part's columns) or advanced by the wrong width, so whatever the labels owe to the lost columns is "
            "never learnt.",
            fix="advance the offset of each slice by the width of the part before it (start += width after "
            "each part), or take the parts with x.split(widths, dim=-1), so that each part reads its own columns "
            "and every column is read.",
            where=where or "", key=info.name,
        )
