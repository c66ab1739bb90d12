"""Whether evaluation predictions and labels number the classes alike (slug ``eval-classes-renumbered``).

A classifier trained with class-index targets predicts those indices.  If the labels it is scored against
in evaluation were numbered by another map (class folders listed per split when one split lacks a class, a
label encoder fitted again on the evaluation data, 1-based labels, a class list in another order), or its
evaluation inputs were prepared so that one class looks like another (colour channels reversed), most
classes are still predicted consistently, only under other numbers: the metric falls while nothing fails.

:func:`reindexed` reads that from the (prediction, label) pairs of an evaluation: the confusion counts of
labels against predictions, the accuracy as given, and the accuracy under a one-to-one relabelling found
greedily (largest counts first).  It concludes only when the relabelling is far better than the labels as
given, moves at least two well-populated labels, and enough pairs were seen (32; under 64, the size of a
small tabular test split, only a relabelled accuracy of 0.8 or more, which chance does not reach), and the
relabelled accuracy stands well above what the same relabelling search gives predictions drawn independently
of the labels with the same class frequencies (:func:`_chance`: two classes and 64 random pairs otherwise
conclude now and then, since swapping two labels doubles the chances); a model that merely confuses classes
moves no label wholesale, and an untrained one has no relabelling that scores well.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

MIN_PAIRS = 32  # (prediction, label) pairs before anything is concluded
MAX_CLASSES = 256  # larger label spaces are not judged (the greedy assignment is cubic)
MIN_MAPPED = 0.5  # the relabelled accuracy must be at least this
FEW_PAIRS = 64  # below this many pairs (a small tabular test split) ...
MIN_MAPPED_FEW = 0.8  # ... the relabelled accuracy must be at least this (chance cannot reach it)
MIN_GAIN = 0.25  # ... and this much above the accuracy as given
CHANCE_SIGMAS = 5.0  # the relabelled accuracy must stand this many standard errors above chance's
MIN_MOVED = 2  # labels that move wholesale to another prediction
MOVED_COUNT = 5  # samples a moved label needs
MOVED_SHARE = 0.5  # the share of a label's samples that land on the one other prediction


@dataclass(frozen=True)
class Reindexing:
    """What :func:`reindexed` found: the accuracy as given and relabelled, and the moved labels as
    ``(label, prediction, count, label's samples)``, largest first."""

    pairs: int
    as_given: float
    relabelled: float
    moved: tuple[tuple[int, int, int, int], ...]

    def describe(self, most: int = 4) -> str:
        shown = ", ".join(f"label {a} is predicted as {b} for {n} of its {t} samples"
                          for a, b, n, t in self.moved[:most])
        more = f" (and {len(self.moved) - most} more labels)" if len(self.moved) > most else ""
        return shown + more


def reindexed(preds: torch.Tensor, labels: torch.Tensor) -> Reindexing | None:
    """The relabelling that explains these evaluation pairs far better than the labels as given, or
    None.  ``preds`` and ``labels``: integer tensors of one shape (on the CPU)."""
    p, y = preds.reshape(-1).long(), labels.reshape(-1).long()
    n = int(p.numel())
    if n < MIN_PAIRS or n != int(y.numel()) or int(p.min()) < 0 or int(y.min()) < 0:
        return None
    classes = int(max(int(p.max()), int(y.max()))) + 1
    if classes < 2 or classes > MAX_CLASSES:
        return None
    counts = torch.zeros(classes, classes, dtype=torch.long)
    counts.index_put_((y, p), torch.ones_like(y), accumulate=True)
    as_given = int(counts.diagonal().sum()) / n
    free = counts.clone()
    mapped, moved = 0, []
    rows = counts.sum(1)
    while True:
        best = int(free.max())
        if best <= 0:
            break
        flat = int(free.argmax())
        a, b = divmod(flat, classes)
        mapped += best
        if a != b and best >= MOVED_COUNT and best >= MOVED_SHARE * int(rows[a]):
            moved.append((a, b, best, int(rows[a])))
        free[a, :] = -1
        free[:, b] = -1
    relabelled = mapped / n
    if relabelled < (MIN_MAPPED if n >= FEW_PAIRS else MIN_MAPPED_FEW) or relabelled - as_given < MIN_GAIN \
            or len(moved) < MIN_MOVED:
        return None
    chance = _chance(rows, counts.sum(0), n)
    if relabelled < chance + CHANCE_SIGMAS * (chance * (1.0 - chance) / n) ** 0.5:
        return None
    moved.sort(key=lambda m: -m[2])
    return Reindexing(n, as_given, relabelled, tuple(moved))


def _chance(label_counts: torch.Tensor, pred_counts: torch.Tensor, n: int) -> float:
    """The accuracy the greedy relabelling reaches on the counts expected when predictions are drawn
    independently of the labels with these class frequencies (the outer product of the two shares)."""
    expected = torch.outer(label_counts.double(), pred_counts.double()) / (n * n)
    total = 0.0
    while True:
        best = float(expected.max())
        if best <= 0:
            return total
        a, b = divmod(int(expected.argmax()), expected.shape[1])
        total += best
        expected[a, :] = -1
        expected[:, b] = -1
