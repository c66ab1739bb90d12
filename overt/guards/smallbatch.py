"""A row evaluated alone gets the output it gets in a batch (slug ``batch-dependent-eval``, for the batch sizes
below the half-batch probe's reach: one row, served alone, included).

An invariant of every correct model in eval mode: a row's output does not depend on the batch it is evaluated in,
for every batch size the program uses, one included.  The half-batch probe of :mod:`overt.guards.independence`
needs a batch of at least four samples to cut in two; a program that evaluates one row (or two, three) per
forward, as a serving endpoint does, never gives it one.  Here, once per model, the first such evaluation forward
is run again with its batch repeated to at least :data:`TILED` rows (copies of the same rows) and each copy's
output is compared with the output the program got.  Copies are the conservative choice: every per-sample
computation gives a copy the row's own output, and a reduction over the batch (a mean, a variance, a maximum)
of identical rows is the row's own value, so only code that takes another path for another batch size (a
normalisation skipped for a one-row batch, a ``squeeze`` of the batch, a branch on ``len(x)``) or a sum over the
batch makes them differ.

Stays silent unless dimension 0 is provably the batch: every batched argument has the same size along it, the
output too; the model's checked training forwards took a first input of the same trailing shape with at least
:data:`MIN_TRAIN_BATCH` samples, the same number on two checked forwards (a sequence fed time-first without a batch
changes its length from forward to forward); and the evaluation gives two forwards in a row with inputs of this
same shape (a time-first sequence that grows one step per forward, as a decoding loop feeds it, never does).  A difference is then confirmed by running the rows alone again (a random layer gives another output
each time: not this cause), and located by recording each submodule's inputs and outputs in both runs: the first
module whose input is the same and whose output is not, and the children it calls in one run and not the other.
The extra forwards run under ``no_grad`` as the user's code (:func:`~overt.guards.aside.user_code`), with the
random generators, the buffers and every module attribute put back afterwards.
"""

from __future__ import annotations

import inspect
import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.aside import user_code
from overt.guards.putback import ModelState
from overt.guards.samerows import close as _close
from overt.guards.samerows import tensors as _tensors
from overt.guards.where import class_location, is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

TILED = 4  # rows in the repeated batch (at least)
SMALL = 4  # batches below this size are probed here (the half-batch probe takes the others)
MIN_TRAIN_BATCH = 8  # samples along dimension 0 of the training forwards that prove it is the batch


def _tile(value: Any, batch: int, times: int) -> Any:
    """``value`` with every tensor batched along dimension 0 repeated ``times`` times along it."""
    if isinstance(value, torch.Tensor):
        return value.repeat(times, *([1] * (value.dim() - 1))) if value.dim() and value.shape[0] == batch else value
    if isinstance(value, tuple):
        return tuple(_tile(v, batch, times) for v in value)
    if isinstance(value, list):
        return [_tile(v, batch, times) for v in value]
    if isinstance(value, dict):
        return {key: _tile(v, batch, times) for key, v in value.items()}
    return value


def _outputs(value: Any, batch: int) -> list[torch.Tensor]:
    return [t for t in _tensors(value) if t.dim() and t.shape[0] == batch and t.is_floating_point()]


class TrainShapes:
    """The first input's shape on a model's checked training forwards: the trailing shape and how often each
    batch size came."""

    def __init__(self) -> None:
        self.seen: dict[int, dict[tuple[int, ...], dict[int, int]]] = {}  # id(ModelInfo) -> trailing -> size -> n

    def record(self, info: ModelInfo, args: tuple) -> None:
        x = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if x is None or not x.dim():
            return
        sizes = self.seen.setdefault(id(info), {}).setdefault(tuple(x.shape[1:]), {})
        if len(sizes) < 16:
            sizes[x.shape[0]] = sizes.get(x.shape[0], 0) + 1

    def batch_first(self, info: ModelInfo, x: torch.Tensor) -> bool:
        """Whether training forwards prove dimension 0 of an input shaped like ``x`` is the batch."""
        sizes = self.seen.get(id(info), {}).get(tuple(x.shape[1:]), {})
        return any(size >= MIN_TRAIN_BATCH and n >= 2 for size, n in sizes.items())


def small_batch(args: tuple, kwargs: dict, output: Any) -> int | None:
    """The batch size of an evaluation forward the half-batch probe cannot cut (1 .. SMALL - 1), else None."""
    inputs = _tensors(list(args) + list(kwargs.values()))
    batched = [t for t in inputs if t.dim()]
    if not batched:
        return None
    batch = batched[0].shape[0]
    if not 1 <= batch < SMALL or any(t.shape[0] != batch for t in batched):
        return None
    return batch if _outputs(output, batch) else None


class _Calls:
    """Each submodule's first input and output tensors, and the children it called, during one forward."""

    def __init__(self, root: nn.Module):
        self.calls: list[tuple[nn.Module, torch.Tensor | None, torch.Tensor | None]] = []
        self.children: dict[int, set[int]] = {}
        self.stack: list[nn.Module] = []
        self.handles = []
        for m in root.modules():
            if m is not root:
                self.handles.append(m.register_forward_pre_hook(self._pre))
                self.handles.append(m.register_forward_hook(self._post, always_call=True))

    def _pre(self, module: nn.Module, args: Any) -> None:
        if self.stack:
            self.children.setdefault(id(self.stack[-1]), set()).add(id(module))
        self.stack.append(module)

    def _post(self, module: nn.Module, args: Any, output: Any) -> None:
        if self.stack and self.stack[-1] is module:
            self.stack.pop()
        ins, outs = _tensors(args), _tensors(output)
        self.calls.append((module, ins[0].detach() if ins else None, outs[0].detach() if outs else None))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


_SIZE_READS = ("len(", ".shape[0]", ".size(0)", ".numel()")


def _forward_line(module: nn.Module) -> str | None:
    """``file.py:LINE`` of the user's ``forward`` of ``module``: the first line of it that branches on the
    batch's size (an ``if`` reading ``len(x)``, ``x.shape[0]``, ``x.size(0)``), else its ``def``."""
    code = getattr(type(module).forward, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    try:
        lines, first = inspect.getsourcelines(type(module).forward)
    except (OSError, TypeError):
        return short_location(code.co_filename, code.co_firstlineno)
    for n, line in enumerate(lines):
        text = line.split("#")[0]
        if ("if " in text or "else" in text) and any(r in text for r in _SIZE_READS):
            return short_location(code.co_filename, first + n)
    return short_location(code.co_filename, code.co_firstlineno)


def _locate(info: ModelInfo, alone: _Calls, tiled: _Calls, batch: int, rows: int) -> tuple[str, str]:
    """(where, what) for the first module of the rows-alone run whose input matches the tiled run's and whose
    output does not."""
    first_tiled: dict[int, tuple[torch.Tensor | None, torch.Tensor | None]] = {}
    for m, i, o in tiled.calls:
        first_tiled.setdefault(id(m), (i, o))
    names = {id(m): info.label(m) for m in info.module.modules()}
    for m, pin, pout in alone.calls:
        if id(m) not in first_tiled:
            continue
        tin, tout = first_tiled[id(m)]
        if pin is not None and tin is not None and (tin.shape[:1] != (rows,) or pin.shape[:1] != (batch,)
                                                    or not _close(pin, tin[:batch])):
            continue  # its input already differs: the cause lies before it
        if pout is None or tout is None:
            continue
        if tout.dim() and tout.shape[0] == rows and pout.dim() and pout.shape[0] == batch and _close(pout, tout[:batch]):
            continue
        label, kind = info.label(m), type(m).__name__
        at = None
        if is_user_file(getattr(sys.modules.get(type(m).__module__), "__file__", None) or "<"):
            at = _forward_line(m) or class_location(m)
        skipped = tiled.children.get(id(m), set()) - alone.children.get(id(m), set())
        if skipped:
            what = (f"{label} ({kind}) takes another path for a batch of {batch}: "
                    f"{', '.join(sorted(names.get(c, '?') for c in skipped))} runs in the batch of {rows} and not "
                    f"for the row{'s' if batch > 1 else ''} alone (a branch on the batch size)")
        elif tout.shape[1:] != pout.shape[1:]:
            what = (f"{label} ({kind}) returns another shape for a batch of {batch} ({tuple(pout.shape)} against "
                    f"{tuple(tout.shape)} for {rows} rows: a squeeze or reshape that takes the batch for a feature)")
        else:
            what = f"{label} ({kind}) gives the row{'s' if batch > 1 else ''} alone another output than in the batch"
        return f"{label}" + (f" ({kind}.forward at {at})" if at else ""), what
    return f"{info.name} forward", (f"the code of {info.name}'s forward gives the row{'s' if batch > 1 else ''} alone "
                                    f"another output than in the batch")


def probe(session: Any, info: ModelInfo, args: tuple, kwargs: dict, output: Any, batch: int,
          mode_words: str) -> bool:
    """Run the evaluation forward's ``batch`` rows again tiled to a batch of at least :data:`TILED` and compare;
    report when a copy's output differs.  True when it ran (whatever it found)."""
    module = info.module
    times = -(-TILED // batch)
    rows = batch * times
    given = _outputs(output, batch)
    saved = ModelState(module, info.param_device)
    try:
        with torch.no_grad(), user_code():  # the user's model runs again: as the user's code runs
            try:
                big = module.forward(*_tile(args, batch, times), **_tile(kwargs, batch, times))
            except Exception:  # noqa: BLE001  a forward that cannot take the tiled batch: nothing to compare
                return True
            mine = _outputs(big, rows)
            if len(mine) != len(given):
                return True
            if all(_close(a[:batch], b) for a, b in zip(mine, given)):
                return True
            # the copies differ: rule out randomness (the rows alone again give what the program got), then locate
            rec_alone = _Calls(module)
            try:
                again = module.forward(*args, **kwargs)
            finally:
                rec_alone.remove()
            again_t = _outputs(again, batch)
            if len(again_t) != len(given) or not all(_close(a, b) for a, b in zip(again_t, given)):
                return True  # not deterministic: a random layer, named elsewhere
            rec_tiled = _Calls(module)
            try:
                module.forward(*_tile(args, batch, times), **_tile(kwargs, batch, times))
            finally:
                rec_tiled.remove()
    finally:
        saved.restore()
        saved.restore_rng()
    where, what = _locate(info, rec_alone, rec_tiled, batch, rows)
    rows_word = "a row evaluated alone (a batch of 1, as the program evaluates it)" if batch == 1 else \
        f"the rows of a batch of {batch} (as the program evaluates them)"
    owner = "rows'" if batch > 1 else "row's"
    session.report(
        "batch-dependent-eval",
        f"{mode_words}, the output of {info.name} for {rows_word} differs from the same "
        f"{owner} output in a batch of {rows} copies: {what}. A prediction then depends on the "
        "batch size: serving one row at a time runs another network than the one trained and validated in batches.",
        fix="make every layer's evaluation path the same whatever the batch size: a branch on len(x) or "
        "x.shape[0] belongs to training only (a BatchNorm uses its running statistics in eval for a batch of one "
        "too), and never squeeze the batch dimension.",
        where=where, key=info.name,
    )
    return True
