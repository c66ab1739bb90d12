"""Guard on class weights that favour the frequent classes (slug ``class-weights-inverted``;
issue 33 family 5).

An invariant of re-weighting: a loss is given per-class weights to make the *rare* classes
count more, so a class seen more often than another never gets the larger weight.  Weights
written in the wrong order (``[1 / p_rare, 1 / p_common]`` for labels ``[common, rare]``) break
it: the common class is weighted up, the rare one down, and the model learns to never predict
the rare class -- while the loss looks fine.

Seen at ``F.cross_entropy``/``F.nll_loss`` calls with a ``weight`` tensor (``CrossEntropyLoss(
weight=...)``; one class index per sample, or per pixel or position of a dense target) and
``F.binary_cross_entropy_with_logits`` with a ``pos_weight`` of one value per output, on checked
steps: the labels of each checked call are counted per class on the device
(one small tensor, read with the checked step's values: nothing is synchronised).  Once
:data:`MIN_LABELS` labels were counted, the frequencies are compared with the weights: reported
when the classes are clearly imbalanced (the most frequent at least :data:`IMBALANCE` times
the rarest), the weights clearly unequal (:data:`SPREAD`), and the weights rise with the
frequency (rank correlation at least :data:`RANK`; with two classes: the frequent class has the
larger weight).  Weights that do not vary, balanced labels, soft (probability) targets: silent.

``class-weight-zero`` (issue 33, round twelve's w283), from the same counts: every class present in
the training labels has a positive weight in the loss.  A balancing formula that reaches zero at the
most frequent class (``log(max_count / count)``) removes that class from the loss.  Reported when a
class seen in the labels weighs zero (or less) and either only two classes are seen, or the
positive weights vary (:data:`SPREAD`), the weights fall with the frequency (Spearman at most
``-ZERO_RANK``), and the zero-weighted class is among the most frequent (:data:`ZERO_NEAR`) but not
far above every positively weighted class (:data:`ZERO_ABOVE`).  A padding or "ignore" class set to
zero among otherwise equal weights, or a dominant background class set to zero: silent.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

MIN_LABELS = 256  # labels counted before the weights are judged
MAX_CLASSES = 1024
IMBALANCE = 3.0  # most frequent class / rarest class (among those seen)
SPREAD = 1.5  # largest weight / smallest weight (among the classes seen)
RANK = 0.8  # Spearman correlation of the weights with the frequencies
ZERO_RANK = 0.5  # class-weight-zero: weights fall with the frequencies (Spearman at most -ZERO_RANK)
ZERO_NEAR = 1.5  # ... a class weighed zero is among the most frequent (within this factor of the top count)
ZERO_ABOVE = 2.0  # ... and at most this many times as frequent as the most frequent class weighed up


def _ranks(values: list[float]) -> list[float]:
    order = sorted(range(len(values)), key=values.__getitem__)
    ranks = [0.0] * len(values)
    i = 0
    while i < len(order):
        j = i
        while j + 1 < len(order) and values[order[j + 1]] == values[order[i]]:
            j += 1
        for k in range(i, j + 1):
            ranks[order[k]] = (i + j) / 2
        i = j + 1
    return ranks


def spearman(a: list[float], b: list[float]) -> float:
    """Rank correlation of ``a`` and ``b`` (ties share their mean rank); 0 when one is constant."""
    ra, rb = _ranks(a), _ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    cov = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    va = sum((x - ma) ** 2 for x in ra)
    vb = sum((y - mb) ** 2 for y in rb)
    return cov / (va * vb) ** 0.5 if va > 0 and vb > 0 else 0.0


def inverted(counts: list[float], weights: list[float]) -> bool:
    """Whether ``weights`` favour the frequent classes of ``counts`` (see the module doc)."""
    seen = [(c, w) for c, w in zip(counts, weights) if c > 0]
    if len(seen) < 2:
        return False
    cs, ws = [c for c, _ in seen], [w for _, w in seen]
    if min(ws) <= 0 or max(cs) < IMBALANCE * min(cs) or max(ws) < SPREAD * min(ws):
        return False
    if len(seen) == 2:
        return (cs[0] - cs[1]) * (ws[0] - ws[1]) > 0
    return spearman(cs, ws) >= RANK


def zeroed(counts: list[float], weights: list[float]) -> list[int]:
    """The classes seen in ``counts`` that a balancing ``weights`` vector weighs zero (or less), when the
    premise of ``class-weight-zero`` is proven (see :data:`ZERO_NEAR`, :data:`ZERO_ABOVE`); else []."""
    seen = [i for i, c in enumerate(counts) if c > 0]
    zeros = [i for i in seen if weights[i] <= 0]
    pos = [i for i in seen if weights[i] > 0]
    if not zeros or not pos:
        return []
    if len(seen) == 2:
        return zeros  # one class left in the loss: predicting it always is the optimum
    pw = [weights[i] for i in pos]
    top = max(counts[i] for i in seen)
    top_pos = max(counts[i] for i in pos)
    if max(pw) < SPREAD * min(pw):
        return []  # the other classes share one weight: a class set aside on purpose (a padding class)
    if spearman([counts[i] for i in seen], [weights[i] for i in seen]) > -ZERO_RANK:
        return []  # not weights that fall with the frequency
    if any(counts[i] * ZERO_NEAR < top or counts[i] > ZERO_ABOVE * top_pos for i in zeros):
        return []  # the zero is not the formula's value at the most frequent classes
    return zeros


def _where(name: str, loc: str) -> str:
    return f"F.{name} call at {loc}" if not loc.startswith("F.") else f"{loc} call"


def _weight_of(name: str, args: tuple, kwargs: dict) -> torch.Tensor | None:
    if name == "binary_cross_entropy_with_logits":
        w = kwargs.get("pos_weight", args[5] if len(args) > 5 else None)
    else:  # (input, target, weight, ...)
        w = kwargs.get("weight", args[2] if len(args) > 2 else None)
    return w if isinstance(w, torch.Tensor) and w.dim() <= 1 and 0 < w.numel() <= MAX_CLASSES else None


class ClassWeightChecks(Check):
    name = "classweights"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.counts: dict[str, list[float]] = {}  # loss location -> labels counted per class
        self.weights: dict[str, list[float]] = {}
        self.done: set[str] = set()

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in ("cross_entropy", "nll_loss", "binary_cross_entropy_with_logits"):
            return
        w = _weight_of(name, args, kwargs)
        if w is None or "meta" in (w.device.type, target.device.type) or not target.numel():
            return
        loc = self.s.losses.site() or f"F.{name}"
        if loc in self.done:
            return
        t = target.detach()
        if name == "binary_cross_entropy_with_logits":
            # one positive rate per output: targets (..., outputs) of 0/1, pos_weight (outputs,)
            if not t.is_floating_point() or t.shape[-1:] != w.shape[-1:] and w.numel() != 1:
                return
            flat = t.reshape(-1, t.shape[-1] if t.dim() else 1).float()
            binary = ((flat == 0) | (flat == 1)).all()
            pos = flat.sum(0)
            neg = flat.shape[0] - pos
            # per output: [positives, negatives]; pos_weight weighs the positives, 1 the negatives
            value = torch.cat((torch.stack((pos, neg), 1).reshape(-1), binary.float()[None]))
            outputs = pos.numel()
        else:
            if t.is_floating_point() or t.dtype == torch.bool or inp.dim() < 2 or inp.shape[1] != w.numel() \
                    or tuple(t.shape) != (inp.shape[0], *inp.shape[2:]):
                return  # class indices: one per sample, or per pixel/position ((N, C, ...) against (N, ...))
            classes = w.numel()
            ii = ignore_index_of(args, kwargs)
            t = t.reshape(-1)
            valid = (t >= 0) & (t < classes) & (t != ii)
            counts = torch.zeros(classes, device=t.device).index_add_(0, t.clamp(0, classes - 1), valid.float())
            value = torch.cat((counts, torch.ones(1, device=t.device)))
            outputs = 0
        value = torch.cat((value, w.detach().float().reshape(-1).to(value.device)))
        step = self.s.step
        self.s.defer(value, self._judge(name, loc, outputs, step))

    def _judge(self, name: str, loc: str, outputs: int, step: int):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            if outputs:  # binary: [pos_0, neg_0, pos_1, neg_1, ..., binary?, pos_weight...]
                if not vals[2 * outputs]:
                    self.done.add(loc)  # soft targets: no class frequencies
                    return
                batch = vals[:2 * outputs]
                w = vals[2 * outputs + 1:]
            else:
                classes = (len(vals) - 1) // 2
                batch, w = vals[:classes], vals[classes + 1:]
            counts = self.counts.setdefault(loc, [0.0] * len(batch))
            if len(counts) != len(batch) or self.weights.setdefault(loc, w) != w:
                self.done.add(loc)  # the weights or the classes changed: not one weighting to judge
                return
            for i, c in enumerate(batch):
                counts[i] += c
            labels = sum(counts) / max(outputs, 1)
            if labels < MIN_LABELS:
                return
            self.done.add(loc)
            if outputs:
                pairs = [(counts[2 * i], counts[2 * i + 1], w[i if len(w) > 1 else 0]) for i in range(outputs)]
                bad = [i for i, (p, n, pw) in enumerate(pairs) if inverted([p, n], [pw, 1.0])]
                if bad:
                    self._report_binary(name, loc, pairs, bad, step)
            elif inverted(counts, w):
                self._report(name, loc, counts, w, step)
            elif zeros := zeroed(counts, w):
                self._report_zero(name, loc, counts, w, zeros, step)

        return callback

    def _report(self, name: str, loc: str, counts: list[float], w: list[float], step: int) -> None:
        total = sum(counts)
        seen = [i for i, c in enumerate(counts) if c > 0]
        common = max(seen, key=counts.__getitem__)
        rare = min(seen, key=counts.__getitem__)
        listing = ""
        if len(seen) > 2:
            listing = "; per class: " + ", ".join(f"{i}: {counts[i] / total:.1%}, weight {w[i]:.3g}" for i in seen[:10])
            listing += f" (and {len(seen) - 10} more)" if len(seen) > 10 else ""
        self.s.report(
            "class-weights-inverted",
            f"the class weights given to F.{name} rise with the label frequencies seen in training: class "
            f"{common} ({counts[common] / total:.1%} of {int(total)} labels) weighs {w[common]:.3g}, class {rare} "
            f"({counts[rare] / total:.1%}) weighs {w[rare]:.3g}{listing}. Re-weighting is meant to make "
            "the rare classes count more; these weights make the model ignore them (look at the rare classes' "
            "recall).",
            fix="list the weights in label order, e.g. weight = counts.sum() / (len(counts) * counts) with "
            "counts = torch.bincount(train_labels); a weight vector written by hand is easily reversed.",
            where=_where(name, loc), key=loc, step=step)

    def _report_zero(self, name: str, loc: str, counts: list[float], w: list[float], zeros: list[int],
                     step: int) -> None:
        total = sum(counts)
        k = max(zeros, key=counts.__getitem__)
        rare = min((i for i, c in enumerate(counts) if c > 0), key=counts.__getitem__)
        more = f" (and {len(zeros) - 1} more class(es) weighed zero)" if len(zeros) > 1 else ""
        self.s.report(
            "class-weight-zero",
            f"the class weights given to F.{name} weigh class {k} {w[k]:.3g} although it is {counts[k] / total:.1%} "
            f"of the {int(total)} training labels counted{more}; the weights fall with the frequency (class {rare}, "
            f"{counts[rare] / total:.1%}, weighs {w[rare]:.3g}), so the zero is the weighting formula's value at the "
            "most frequent class (log(max_count / count) is 0 there). A class weighed zero is removed from the loss: "
            "the model is never taught to predict it and gets its examples wrong (look at that class's recall).",
            fix="use a weighting that stays positive for every class, e.g. weight = 1 + log(max_count / count), "
            "weight = counts.sum() / (len(counts) * counts) or (1 - beta) / (1 - beta ** counts); a class that "
            "must not count (padding) belongs in ignore_index, not in a zero weight.",
            where=_where(name, loc), key=f"zero:{loc}", step=step)

    def _report_binary(self, name: str, loc: str, pairs: list[tuple[float, float, float]], bad: list[int],
                       step: int) -> None:
        i = bad[0]
        p, n, pw = pairs[i]
        which = f"output {i}: " if len(pairs) > 1 else ""
        self.s.report(
            "class-weights-inverted",
            f"pos_weight of F.{name} favours the frequent side: {which}positives are {p / (p + n):.1%} of "
            f"{int(p + n)} training targets and pos_weight is {pw:.3g} ({len(bad)} of {len(pairs)} outputs so). "
            "pos_weight is meant to make the rare positives count more; this one weights the common side up "
            "and the model learns to ignore the rare one.",
            fix="pos_weight = negatives / positives per output (computed from the training targets), not its "
            "inverse.",
            where=_where(name, loc), key=loc, step=step)
