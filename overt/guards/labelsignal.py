"""Guard on labels that do not belong to their inputs (slug ``labels-unrelated-to-inputs``;
issue 33 family 4).

An invariant of supervised training: a sample's label depends on its input.  Inputs and labels
paired wrongly break it -- feature and label files listed in two different orders, one of two
arrays shuffled, labels read from another column -- and the model then learns the label
frequencies and nothing else, while training looks normal (the loss falls to the entropy of
the label frequencies and stays there).

Two independent signs are required, both from checked-step values computed once at the end
(references to the last batches and copies of a few samples are kept; nothing is synchronised
during training; at the end the loss is read first, and the neighbour test, an n x n distance
matrix that costs milliseconds, runs only when the loss is still at the label entropy):

- the training loss stays near the entropy of the labels seen (the loss of predicting the label
  frequencies; those of the labels kept below): the mean cross-entropy of the last :data:`LAST`
  checked classification batches is at least :data:`AT_PRIOR` times that entropy, after a run of
  at least :data:`MIN_SPAN` steps and at least two whole epochs (a DataLoader started a third
  pass; without a DataLoader the length of an epoch is not known and the check stays silent): a
  model still at the start of learning is not judged;
- the labels do not follow the inputs: among up to :data:`SAMPLES` training samples kept from
  checked steps (the model's float input, flattened, standardised per feature), a sample's nearest
  neighbour (exact copies aside) has the same label hardly more often than chance (the sum of the
  squared label frequencies), less than :data:`MARGIN` of the way from chance to always.  With
  correctly paired data, neighbours in input space share their label far more often than chance
  (digits: 0.95 against 0.10).

Judged once, at the end of the run, for ``cross_entropy``/``nll_loss`` with one class index per
sample.  Silent when another finding already explains a model that does not learn (parameters not
updating or not optimised, no gradient, frozen weights, misplaced or stale gradients, non-finite
values), for token inputs, inputs wider than :data:`MAX_FEATURES`, or too few samples.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.losses import ignore_index_of

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

SAMPLES = 512  # training samples kept for the neighbour test
MIN_SAMPLES = 128
MAX_FEATURES = 4096
LAST = 3  # checked batches whose loss is compared with the label entropy
AT_PRIOR = 0.85  # mean loss / label entropy at the end
MIN_ENTROPY = 0.3  # nats: labels that are nearly all one class are not judged
MARGIN = 0.2  # share of the way from chance to 1 that neighbour agreement must stay under
MIN_SPAN = 20  # steps between the first and the last checked batch
MIN_PASSES = 3  # DataLoader passes started over one dataset (two whole epochs done)
EXPLAINED = ("params-not-updating", "params-not-optimized", "optimizer-not-on-model", "no-gradient", "weights-frozen",
             "stale-gradients", "zero-grad-misplaced", "non-finite", "step-bypasses-scaler", "clip-without-gradients")


class LabelSignalChecks(Check):
    name = "labelsignal"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.x: tuple[torch.Tensor, int] | None = None  # the latest checked forward's input, flattened
        self.xs: list[torch.Tensor] = []  # training inputs kept (copies), flattened
        self.ys: list[tuple[torch.Tensor, int]] = []  # their labels, with the loss's ignore_index
        self.kept = 0
        # the latest checked classification batches: (step, logits or log-probabilities, (labels, ignore_index), name)
        self.recent: list[tuple[int, torch.Tensor, tuple[torch.Tensor, int], str]] = []
        self.first: int | None = None  # the step of the first classification batch
        self.classes = 0
        self.loc = ""
        self.off = False

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        if self.off or self.kept >= SAMPLES or x is None or not x.is_floating_point() or x.dim() < 2 \
                or x.shape[0] < 2:
            self.x = None
            return
        flat = x.detach().reshape(x.shape[0], -1)
        self.x = (flat, self.s.step) if flat.shape[1] <= MAX_FEATURES else None

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        """Keep references to the batch (the last :data:`LAST` ones) and, until :data:`SAMPLES`
        are kept, copies of its inputs and labels: everything is computed at the end."""
        if self.off or name not in ("cross_entropy", "nll_loss"):
            return
        if target.is_floating_point() or target.dtype == torch.bool or target.dim() != 1 or inp.dim() != 2 \
                or inp.shape[0] != target.shape[0] or inp.shape[1] < 2 or inp.device.type == "meta":
            return
        classes = inp.shape[1]
        if self.classes and classes != self.classes:
            self.off = True  # two classification heads: not one labelling to judge
            return
        self.classes = classes
        step = self.s.step
        if self.first is None:
            self.first, self.loc = step, self.s.losses.site() or f"F.{name}"
        # a copy of the labels, masked at the end (-1: ignored): one copy here instead of a mask per step
        t = target.detach().clone()
        ii = ignore_index_of(args, kwargs)
        self.recent.append((step, inp.detach(), (t, ii), name))
        del self.recent[:-LAST]
        x = self.x
        if x is not None and x[1] == step and x[0].shape[0] == t.shape[0] and x[0].device == t.device \
                and self.kept < SAMPLES:
            take = min(SAMPLES - self.kept, t.shape[0])
            self.xs.append(x[0][:take].clone())
            self.ys.append((t[:take], ii))
            self.kept += take

    def _labels(self, kept: tuple[torch.Tensor, int]) -> torch.Tensor:
        """Labels kept with their ignore_index, those the loss ignores (or out of range) as -1."""
        t, ii = kept
        return t.masked_fill((t < 0) | (t >= self.classes) | (t == ii), -1)

    def end_of_run(self) -> None:
        s = self.s
        if self.off or len(self.recent) < LAST or self.kept < MIN_SAMPLES or self.first is None:
            return
        if self.recent[-1][0] - self.first < MIN_SPAN or any(s.reporter.has(slug) for slug in EXPLAINED):
            return
        if max(s.loader_passes.values(), default=0) < MIN_PASSES:
            return
        iis = {ii for _, ii in self.ys}
        if len(iis) == 1:  # one ignore_index (as a rule): the labels masked at once, not batch by batch
            y = self._labels((torch.cat([t for t, _ in self.ys]), iis.pop()))
        else:
            y = torch.cat([self._labels(kept) for kept in self.ys])
        labelled = y >= 0
        counts = torch.zeros(self.classes, device=y.device).index_add_(0, y.clamp_min(0), labelled.float())
        nll = torch.zeros((), device=y.device)
        n = torch.zeros((), device=y.device)
        for _, out, kept, name in self.recent:
            labels = self._labels(kept)
            logp = out.float().log_softmax(1) if name == "cross_entropy" else out.float()
            valid = labels >= 0
            nll = nll + -(logp.gather(1, labels.clamp_min(0)[:, None])[:, 0] * valid).sum().to(nll.device)
            n = n + valid.sum().to(n.device)
        # the loss first: the neighbour test (an n x n distance matrix, milliseconds) runs only for a
        # loss still at the label entropy, i.e. almost never on a model that learns
        s.defer(torch.cat((nll[None], n.float()[None], counts)), self._judge(y))

    def _agreement(self, y: torch.Tensor) -> float:
        """How often a kept sample's nearest neighbour in input space (exact copies aside) has its
        label: read at the end of the run, once, and only when the loss already looks suspect."""
        x = torch.cat([a.float() for a in self.xs])
        x = (x - x.mean(0)) / x.std(0).clamp_min(1e-6)
        d = torch.cdist(x, x, compute_mode="donot_use_mm_for_euclid_dist")  # exact zeros for copies
        d[d <= 1e-6] = float("inf")  # itself, and copies of it kept on two checked steps
        d[:, y < 0] = float("inf")  # unlabelled samples (ignore_index) are nobody's neighbour
        labelled = y >= 0
        agree = ((y[d.argmin(1)] == y) & labelled).float().sum() / labelled.float().sum().clamp_min(1)
        return float(agree.item())

    def _judge(self, y: torch.Tensor):
        samples = y.shape[0]

        def callback(vals: list[float]) -> None:
            nll, n, counts = vals[0], vals[1], vals[2:]
            total = sum(counts)
            if not n or not total:
                return
            freqs = [c / total for c in counts if c > 0]
            entropy = -sum(f * math.log(f) for f in freqs)
            chance = sum(f * f for f in freqs)
            loss = nll / n
            if entropy < MIN_ENTROPY or loss < AT_PRIOR * entropy:
                return
            agree = self._agreement(y)
            if agree > chance + MARGIN * (1 - chance):
                return
            self.s.report(
                "labels-unrelated-to-inputs",
                f"the labels given to the loss at {self.loc} do not follow the inputs: the training loss is still "
                f"{loss:.3g} at the end, {loss / entropy:.0%} of the entropy of the label frequencies ({entropy:.3g}: "
                f"what predicting the frequencies alone scores), and among {samples} training samples a sample's "
                f"nearest neighbour in input space has the same label {agree:.0%} of the time, close to chance "
                f"({chance:.0%}). Inputs and labels paired wrongly (two file listings in different orders, one of "
                "two arrays shuffled or sorted on its own, labels read from another column) do this: the model can "
                "only learn the label frequencies.",
                fix="pair each input with its own label: build both from one listing (sort the file names once and "
                "derive the label path from the input path), shuffle indices rather than arrays, and check a few "
                "pairs by eye (show the input with its label).",
                where=f"labels at {self.loc}", key="labels")

        return callback
