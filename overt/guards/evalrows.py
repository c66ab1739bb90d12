"""Guard on evaluation inputs that are the training inputs, met as tensors (slug ``val-overlaps-train``).

:mod:`overt.guards.evaloverlap` compares the data sets of DataLoader passes.  A program that hands the model
tensors it prepared itself -- features read from a cache, a split made by indexing -- has no data set to
compare: a feature cache keyed without the split (Yale-LILY/DYLE#1: one cache file, so validation loads the
training features) evaluates on the training rows while every line looks right.  The premise is the same,
observed on the tensors the model is given: an evaluation that is not of data held out from training measures
memorisation.

Training side: on the first :data:`TRAIN_LOOKS` checked training forwards of a model whose inputs the skew
comparison reads (:mod:`overt.guards.skew`), each row of its first input is hashed exactly (its bits times fixed
random integers, summed with integer wrap-around: equal rows, equal hashes, whatever batch they sit in) and the
address of its storage is kept.  Evaluation side: each evaluation batch that comparison looks at (at least
:data:`MIN_ROWS` rows) counts how many of its rows hash to a training row (a device count, read with the next
checked step's values) and how many of the first training batch's rows it holds.  Only models given one tensor
argument in training and evaluation are compared: a graph model's node features beside their edges, rows beside
a mask, are trained as a whole and scored in parts (transductive learning: the evaluation nodes are training
inputs by design).  Judged at the end of the run, after the DataLoader comparison (which wins where it
judged anything): reported when every compared evaluation batch that is not the training tensor itself (training
accuracy) holds at least :data:`FAIL_SHARE` training rows, one of them holds at least that share of the first
training batch's rows (the evaluation is over the training set, not over a few training rows) and no evaluation
batch was held out.  Augmented or
noisy training inputs never hash alike (silent); a run that also evaluates held-out rows is silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.overlap import FAIL_SHARE

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

TRAIN_LOOKS = 3  # checked training forwards whose rows are hashed, per model (the first and the warm-up ones)
MAX_ROWS = 1 << 16  # training row hashes kept per model
MAX_COLS = 4096  # values of a row that are hashed (evenly spaced beyond this)
MIN_ROWS = 32  # rows of an evaluation batch that is compared
_BITS = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


class _Coef:
    """Fixed random odd 64-bit integers per row length and device (a private generator: no draw from the run's)."""

    def __init__(self) -> None:
        self.cache: dict[tuple[int, str], tuple[torch.Tensor, torch.Tensor | None]] = {}

    def get(self, d: int, device: torch.device) -> tuple[torch.Tensor, torch.Tensor | None]:
        key = (d, str(device))
        got = self.cache.get(key)
        if got is None:
            g = torch.Generator().manual_seed(0x5EED + d)
            k = min(d, MAX_COLS)
            coef = torch.randint(-(1 << 62), 1 << 62, (k,), generator=g, dtype=torch.int64) * 2 + 1
            cols = torch.linspace(0, d - 1, k).round().long() if d > MAX_COLS else None
            got = self.cache[key] = (coef.to(device), cols.to(device) if cols is not None else None)
        return got


_COEF = _Coef()


def row_hashes(x: torch.Tensor) -> torch.Tensor | None:
    """One int64 per row of ``x`` (its first dimension), equal for rows with equal bits; None for a tensor that
    cannot be hashed (complex, no rows)."""
    if x.dim() < 1 or x.shape[0] == 0 or x.is_complex():
        return None
    flat = x.detach().reshape(x.shape[0], -1)
    if flat.shape[1] == 0:
        return None
    coef, cols = _COEF.get(flat.shape[1], flat.device)
    if cols is not None:
        flat = flat.index_select(1, cols)
    if flat.is_floating_point():
        bits = flat.contiguous().view(_BITS[flat.element_size()]).long()
    else:
        bits = flat.long()
    return (bits * coef).sum(1)


def _storage(x: torch.Tensor) -> int:
    try:
        return x.untyped_storage().data_ptr()
    except Exception:  # a tensor without storage (a functional or fake tensor)
        return -1


class EvalRowChecks(Check):
    name = "evalrows"

    def __init__(self, session: Any):
        super().__init__(session)
        self.train: dict[int, list[torch.Tensor]] = {}  # id(ModelInfo) -> training row hashes
        self.kept: dict[int, int] = {}  # id(ModelInfo) -> how many
        self.looks: dict[int, int] = {}  # id(ModelInfo) -> checked training forwards hashed
        self.storages: dict[int, set[int]] = {}  # id(ModelInfo) -> storages of training inputs
        self.first: dict[int, torch.Tensor] = {}  # id(ModelInfo) -> the first training batch's row hashes
        self.inputs: dict[int, int] = {}  # id(ModelInfo) -> tensor arguments of its training forwards (-1: mixed)
        # (model, training rows among them, rows, where, share of the first training batch's rows it holds)
        self.seen: list[tuple[str, int, int, str, float]] = []
        self.own = 0  # evaluation batches that were a training input tensor itself

    def training_input(self, info: ModelInfo, x: torch.Tensor, tensors: int = 1) -> None:
        """The first input of a checked training forward (called by the skew comparison; ``tensors``: how many
        tensor arguments the forward was given)."""
        key = id(info)
        n = self.looks.get(key, 0)
        if n >= TRAIN_LOOKS or self.kept.get(key, 0) >= MAX_ROWS:
            return
        self.looks[key] = n + 1
        h = row_hashes(x)
        if h is None:
            return
        h = h[:MAX_ROWS - self.kept.get(key, 0)]
        self.train.setdefault(key, []).append(h)
        self.first.setdefault(key, h)
        self.kept[key] = self.kept.get(key, 0) + h.shape[0]
        self.storages.setdefault(key, set()).add(_storage(x))
        self.inputs[key] = tensors if self.inputs.get(key, tensors) == tensors else -1

    def evaluation_input(self, info: ModelInfo, x: torch.Tensor, where: str, tensors: int = 1) -> None:
        """The first input of an evaluation forward the skew comparison looks at (``tensors``: how many tensor
        arguments the forward was given)."""
        key = id(info)
        rows = self.train.get(key)
        if not rows or x.shape[0] < MIN_ROWS or len(self.seen) >= 16:
            return
        if tensors != 1 or self.inputs.get(key) != 1:
            return  # a graph and its node features, rows and a mask: the rows may be scored apart (transductive)
        if _storage(x) in self.storages.get(key, ()):
            self.own += 1  # the training tensor itself: training accuracy, not an evaluation set
            return
        h = row_hashes(x)
        if h is None or h.device != rows[0].device:
            return
        train = torch.cat(rows) if len(rows) > 1 else rows[0]
        if len(rows) > 1:
            self.train[key] = [train]
        found = torch.isin(h, train).sum()
        covered = torch.isin(self.first[key], h).float().mean()  # the first training batch's rows it holds
        name, n = info.name, int(x.shape[0])

        def seen(vals: list[float]) -> None:
            self.seen.append((name, int(vals[0]), n, where, vals[1]))

        self.s.defer(torch.stack((found.double(), covered.double())), seen)

    def end_of_run(self) -> None:
        judged = getattr(getattr(self.s, "evaloverlap", None), "judged", None)
        if judged or not self.seen:
            return  # DataLoader passes were compared: their verdict stands
        if any(shared < FAIL_SHARE * n for _, shared, n, _, _ in self.seen):
            return  # an evaluation of held-out rows exists
        same = [s for s in self.seen if s[4] >= FAIL_SHARE]
        if not same:
            return  # parts of the training inputs, scored apart (rows of a transductive training set)
        name, shared, n, where, _ = same[0]
        self.s.report(
            "val-overlaps-train",
            f"every evaluation batch of {name} the run compared is made of its training inputs: {shared} of {n} "
            f"rows ({shared / max(n, 1):.0%}) are bit for bit rows it was trained on, in another tensor than the "
            "training batch (so not a training-accuracy pass over the training tensor), and no evaluation went over "
            "rows held out from training. The reported metrics measure memorisation: a feature cache keyed without "
            "the split (validation loads the training features), a split whose indices are the training indices, "
            "or the training file read for validation.",
            fix="give evaluation the held-out split's own inputs: key every cache by the split (and by what built "
            "it), split once into disjoint index sets, and check that the evaluation tensors are not the training "
            "ones.",
            where=where, key="val-overlap",
        )
