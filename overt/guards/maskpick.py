"""Guard on a max or min inside a loss that selects the entries the program masked out (slug
``selection-picks-masked``; issue 33).

An invariant of the mining steps of metric-learning and contrastive losses: over a pairwise matrix of a
batch (similarities or distances between anchors and candidates), a program masks the entries a selection
must not take -- each anchor's own pair on the diagonal, the pairs of its own class -- by overwriting them
with a constant (``fill_diagonal_``, ``diagonal().fill_``, ``masked_fill``, ``x[mask] = ...``,
``torch.where(mask, c, x)``), and then takes a ``max``/``min``/``topk`` over the rest: the hardest negative,
the nearest neighbour.  The selection never lands on a masked entry unless a row has nothing else.  When it
lands on one in every row, the mask was turned around on the way (a ``-inf`` meant for a ``max`` in
similarity space that becomes ``+inf`` through ``1 - sim``; a ``+inf`` filled for a ``min`` and then a
``max``): every anchor is paired with the entry that was meant to be excluded, and because a written constant
carries no gradient, the mined term trains nothing (``relu(pos - inf + margin)`` is 0 for every sample,
jinnnju/PaAno#1).

Read off autograd's graph of the loss backwarded on checked steps (the same wrapper of
``torch.autograd.backward`` as :mod:`overt.guards.termscale`, in place only while a checked step lasts): a
``MaxBackward0``/``MinBackward0`` (a max or min over a dimension) or ``TopkBackward0`` node over a square
``N x N`` matrix (``N >= MIN_ROWS``), reached from the loss without entering a watched model's own graph,
whose input is, through element-wise nodes with constants (``1 - x``, ``-x``, ``x * c``, ``x / c``, a clone),
a write of a constant into the matrix.  The written positions come from the write's own node (a
``masked_fill``'s saved mask, a ``where``'s condition, or the node applied to a gradient of ones: a written
constant passes no gradient back).  Only a mining mask's geometry is judged: the whole diagonal written (the
anchor's own entry excluded), fewer than half of the entries written.  Reported, once per backward line,
when every row that has an unwritten entry selects a written one, on ``CALLS`` checked steps.  Nothing reads
the device outside a checked step: the selected positions are counted on the device and read with the
session's deferred reads.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

MIN_ROWS = 8  # rows of the pairwise matrix: fewer and a batch too small to tell anything
CALLS = 2  # checked steps on which every row selected a masked entry
MAX_NODES = 400  # autograd nodes walked from the loss (the loss side only: a watched model's graph is not entered)
MAX_UP = 6  # element-wise nodes between the selection and the write
MAX_LOOKS = 4  # selections judged per backward
QUIET = 3  # checked backwards in a row with no masked selection after which the check stops looking
#: the selections over a dimension whose saved indices say what was taken
_SELECTIONS = {"MaxBackward0": "torch.max", "MinBackward0": "torch.min", "TopkBackward0": "torch.topk"}
#: element-wise nodes of one tensor input and a constant, which keep every entry where it was
_ELEMENTWISE = frozenset(("RsubBackward1", "NegBackward0", "MulBackward1", "DivBackward1", "AddBackward1",
                          "SubBackward1", "CloneBackward0", "ToCopyBackward0", "ExpBackward0", "ContiguousBackward0"))
_BINARY = frozenset(("MulBackward0", "DivBackward0", "AddBackward0", "SubBackward0", "RsubBackward0"))
_WRITES = {"CopySlices": "an in-place write (fill_diagonal_, diagonal().fill_, x[idx] = c)",
           "MaskedFillBackward0": "masked_fill", "IndexPutBackward0": "an index assignment (x[mask] = c)",
           "WhereBackward0": "torch.where", "MulBackward0": "a product with a 0/1 mask (its zeros)"}


def _only_child(fn: Any) -> Any:
    """The one input node of an element-wise node whose other operand is a constant, or None."""
    kind = type(fn).__name__
    nxt = [n for n, _ in fn.next_functions]
    if kind in _ELEMENTWISE:
        return nxt[0] if nxt and all(n is None for n in nxt[1:]) else None
    if kind in _BINARY and len(nxt) == 2 and (nxt[0] is None) != (nxt[1] is None):
        return nxt[0] if nxt[0] is not None else nxt[1]
    return None


def _mask_factor(fn: Any) -> torch.Tensor | None:
    """The constant tensor (more than one element) a ``MulBackward0`` node multiplied its one input by, or None."""
    if type(fn).__name__ != "MulBackward0":
        return None
    nxt = [n for n, _ in fn.next_functions]
    if len(nxt) != 2 or (nxt[0] is None) == (nxt[1] is None):
        return None
    try:
        other = fn._saved_other if nxt[0] is not None else fn._saved_self
    except Exception:  # noqa: BLE001  freed saved values
        return None
    return other if isinstance(other, torch.Tensor) and other.numel() > 1 else None


def written_positions(write: Any, sizes: tuple[int, ...], device: Any) -> tuple[torch.Tensor, Any] | None:
    """(a boolean tensor of ``sizes``: the entries ``write`` (an autograd node) overwrote with a constant, whether
    it is a mask: a device boolean for a product, whose factor must be 0/1; True otherwise), or None when it is
    not a write of a constant."""
    kind = type(write).__name__
    if kind == "MulBackward0":
        factor = _mask_factor(write)
        if factor is None:
            return None
        m = factor.expand(sizes)
        return m == 0, ((m == 0) | (m == 1)).all()
    got = _written(write, sizes, device)
    return None if got is None else (got, True)


def _written(write: Any, sizes: tuple[int, ...], device: Any) -> torch.Tensor | None:
    kind = type(write).__name__
    nxt = [n for n, _ in write.next_functions]
    if not nxt or nxt[0] is None and kind != "WhereBackward0":
        return None
    if kind == "MaskedFillBackward0":
        if len(nxt) > 1 and nxt[1] is not None:
            return None  # the value written is computed: not a mask
        return write._saved_mask.bool().expand(sizes)
    if kind == "WhereBackward0":
        if len(nxt) != 2 or (nxt[0] is None) == (nxt[1] is None):
            return None
        cond = write._saved_condition.bool().expand(sizes)
        return cond if nxt[0] is None else ~cond
    if kind in ("CopySlices", "IndexPutBackward0"):
        if any(n is not None for n in nxt[1:]):
            return None  # the values written carry a gradient: a computed value, not a constant
        if kind == "IndexPutBackward0" and bool(getattr(write, "_saved_accumulate", False)):
            return None
        try:
            with torch.no_grad():  # the node applied to a gradient of ones: a written constant passes back 0
                grads = write(torch.ones(sizes, device=device))
        except Exception:  # noqa: BLE001  another dtype, a node that cannot run on its own: not judged
            return None
        base = grads[0] if isinstance(grads, tuple) else grads
        if not isinstance(base, torch.Tensor) or tuple(base.shape) != tuple(sizes):
            return None
        return base == 0
    return None


class MaskPickChecks(Check):
    name = "maskpick"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.done: set[str] = set()
        self.runs: dict[str, int] = {}  # selection -> checked steps in a row on which every row picked a mask
        self.quiet = 0  # checked backwards in a row with no candidate
        self.retired = False  # QUIET of them: the loss has no mining step, the backward wrapper stops calling
        # id(selection node) -> (it, the user's line of the max/min/topk), from axes' window (first checked steps);
        # kept until this step's backward only (graph-leak)
        self.lines: dict[int, tuple[Any, str]] = {}

    def selected(self, out: Any, loc: str) -> None:
        """The axes window saw the user's line ``loc`` call max/min/topk with result ``out``."""
        values = out[0] if isinstance(out, tuple) and out else None
        fn = getattr(values, "grad_fn", None)
        if fn is not None and type(fn).__name__ in _SELECTIONS and len(self.lines) < 32:
            self.lines[id(fn)] = (fn, loc)

    def after_checked_step(self, oi: OptInfo) -> None:
        self.lines.clear()

    def remove_hooks(self) -> None:
        self.lines.clear()

    def on_backward(self, tensors: Any, outputs: dict[int, Any]) -> None:
        """Called by the backward wrapper of a checked step (before termscale forgets the step's outputs)."""
        try:
            self._look(tensors, outputs)
        finally:
            self.lines.clear()

    def _look(self, tensors: Any, outputs: dict[int, Any]) -> None:
        if not outputs or len(self.done) > 4:
            return
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        root = getattr(tensors, "grad_fn", None)
        if root is None or tensors.numel() != 1:
            return
        found = self._selections(root, outputs)
        if not found:
            self.quiet += 1
            self.retired = self.quiet >= QUIET
            return
        self.quiet = 0
        loc = user_location(4) or "the backward call"
        if loc in self.done:
            return
        for sel, write in found[:MAX_LOOKS]:
            self._judge(sel, write, loc)

    def _selections(self, root: Any, outputs: dict[int, Any]) -> list[tuple[Any, Any]]:
        """(selection node, write node) pairs of the loss's graph, the loss side only."""
        seen = {root}
        todo = [root]
        out: list[tuple[Any, Any]] = []
        while todo and len(seen) < MAX_NODES:
            fn = todo.pop()
            if id(fn) in outputs and outputs[id(fn)] is fn:
                continue  # a watched model's output: its graph is the model's, not the loss's
            if type(fn).__name__ in _SELECTIONS:
                write = self._write_under(fn)
                if write is not None:
                    out.append((fn, write))
            for nxt, _ in fn.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return out

    @staticmethod
    def _write_under(sel: Any) -> Any:
        try:
            sizes = tuple(int(n) for n in sel._saved_self_sym_sizes)
        except Exception:  # noqa: BLE001  freed saved values
            return None
        if len(sizes) != 2 or sizes[0] != sizes[1] or sizes[0] < MIN_ROWS:
            return None
        fn = sel.next_functions[0][0] if sel.next_functions else None
        for _ in range(MAX_UP):
            if fn is None:
                return None
            if type(fn).__name__ in _WRITES and (type(fn).__name__ != "MulBackward0" or _mask_factor(fn) is not None):
                return fn
            fn = _only_child(fn)
        return None

    def _judge(self, sel: Any, write: Any, loc: str) -> None:
        sizes = tuple(int(n) for n in sel._saved_self_sym_sizes)
        got = written_positions(write, sizes, sel._saved_indices.device)
        if got is None:
            return
        written, is_mask = got
        dim = int(sel._saved_dim) % 2
        idx = sel._saved_indices
        if idx.dim() == 1:
            idx = idx.unsqueeze(dim)
        idx = idx.narrow(dim, 0, 1).to(written.device)  # topk: its first pick, the most extreme
        n = sizes[0]
        picked = written.gather(dim, idx).reshape(-1)
        open_rows = (~written).any(dim).reshape(-1)  # rows with something left to select
        diag = written.diagonal().all()
        share = written.float().mean()
        mask = torch.as_tensor(is_mask, device=written.device).float()
        counts = torch.stack(((picked & open_rows).sum().float(), open_rows.sum().float(), diag.float(), share, mask))
        kind = type(sel).__name__
        seen = self.lines.get(id(sel))
        line = seen[1] if seen is not None and seen[0] is sel else None
        self.s.defer(counts, self._on_counts(loc, line, kind, dim, n, type(write).__name__))

    def _on_counts(self, loc: str, line: str | None, kind: str, dim: int, n: int, write: str):
        key = f"{line or kind}|{dim}|{n}@{loc}"  # one selection of the loss: a loss may take several

        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            picked, rows, diag, share, mask = vals
            if not (mask == 1.0 and diag == 1.0 and share < 0.5 and rows >= MIN_ROWS and picked == rows):
                self.runs.pop(key, None)
                return
            self.runs[key] = self.runs.get(key, 0) + 1
            if self.runs[key] >= CALLS:
                self.done.add(loc)
                self._report(loc, line, kind, dim, n, write, int(rows))

        return callback

    def _report(self, loc: str, line: str | None, kind: str, dim: int, n: int, write: str, rows: int) -> None:
        op = _SELECTIONS[kind]
        at = f"{op}(..., dim={dim}) at {line}" if line else f"{op}(..., dim={dim})"
        if write == "MulBackward0":
            how = ("a 0/1 mask multiplied in turns the excluded entries into zeros, which a min takes before any "
                   "real distance")
            effect = "each anchor's hardest negative is a zero of the mask, so the negatives are never pushed away"
        else:
            how = ("a -inf meant for a max in similarity space that 1 - sim turns into +inf, a +inf filled for a "
                   "min and then a max")
            effect = "relu(pos - inf + margin) is 0 for every sample"
        msg = (f"The loss backwarded at {loc} takes {at} over a {n}x{n} pairwise matrix whose masked entries "
               f"(the whole diagonal, each anchor's own entry, among them) were overwritten with a constant by "
               f"{_WRITES[write]}, and on {CALLS} checked steps in a row it selected a masked entry in all {rows} "
               "rows. A mask is written so that the selection skips those entries; selected in every row, it has "
               f"been turned around on the way ({how}): every anchor's selection (its hardest negative, its nearest "
               "neighbour) is the entry that was meant to be excluded, a constant that carries no gradient, so the "
               f"mined term trains nothing ({effect}) while the run looks normal.")
        fix = ("write the mask with the value the selection skips in the space where it selects, after every "
               "conversion: -inf for a max, +inf for a min (masked_fill(mask, float('inf')) before a min instead of "
               "a product with the mask). A hardest negative taken as the max of 1 - sim needs the similarities' "
               "diagonal filled with +inf (so that 1 - sim is -inf there), or the distances' diagonal filled with "
               "-inf after the conversion.")
        where = f"{op} call at {line}" if line else f"the loss backwarded at {loc}"
        self.s.report("selection-picks-masked", msg, where=where, fix=fix, key=loc)

