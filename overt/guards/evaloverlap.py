"""Guard on an evaluation pass over the training samples (slug ``val-overlaps-train``, at run time).

The engine judges its two loaders once at setup (:mod:`overt.guards.setup`).  A script run under
``overt run`` or ``overt.guard`` has no such declaration, but the session sees every DataLoader pass
begin: a pass whose first batch reaches a model in training mode with gradients enabled is training,
one that runs with every watched model in eval mode or autograd off and takes no optimizer step
from its first batch to its end (``StopIteration``, or the next pass's first batch where a loop stops
at its length, as Lightning's do) is evaluation (a pass with steps in it trained, whatever the modes
at its start: a distillation loop whose student is not watched yet).  At the end of the first
evaluation pass over a data set, that data set is compared once with the data set of the latest
training pass, by :func:`overt.guards.overlap.shared_samples` (indices into the same data set, or
tensor data sets row by row; no item of another data set is read: that would run its transforms and
draw from the run's random generators).

What is reported, at the end of the run: an evaluation data set that is another object than the
training data set but holds mostly (:data:`overt.guards.overlap.FAIL_SHARE`) training samples (a test
set built from the training split, a validation subset drawn from the training indices), when no
evaluation pass of the run went over data held out from training.  Evaluating the training loader
itself (training accuracy) is not one; nor is a run that also evaluates a held-out set (training
accuracy on a second copy of the training data, next to a real validation set).
"""

from __future__ import annotations

from typing import Any

import torch

from overt.guards.check import Check
from overt.guards.overlap import EDGE_FIX, FAIL_SHARE, MIRROR_FIX, shared_samples

MAX_JUDGED = 8  # evaluation data sets compared per run


class EvalOverlapChecks(Check):
    name = "evaloverlap"

    def __init__(self, session: Any):
        super().__init__(session)
        self.train: Any = None  # the data set of the latest training pass
        self.judged: dict[int, tuple[Any, tuple[int, int, str] | None, str]] = {}  # id(eval data set) -> verdict
        self.open: list[list] = []  # [data set, steps at its first batch] of passes begun as evaluations

    def first_batch(self, it: Any) -> None:
        """The first batch of a DataLoader pass (called from the iterator's ``__next__``)."""
        s = self.s
        dataset = getattr(it, "_dataset", None)
        if dataset is None or not s.models:
            return
        self._settle()  # passes that stopped at their length (Lightning's loops) or at a break
        models = s.models.values()
        evaluating = not torch.is_grad_enabled() or all(not info.module.training for info in models)
        if not evaluating:
            self.train = dataset
            it._overt_overlap = None
            return
        record = [dataset, self._steps()]
        it._overt_overlap = record
        if len(self.open) < MAX_JUDGED:
            self.open.append(record)

    def _steps(self) -> int:
        """Steps taken by every watched optimizer together (the session's ``step`` is the most any one
        took: a second model trained after a first does not move it)."""
        return sum(oi.steps for oi in self.s.optimizers.values())

    def pass_ended(self, it: Any) -> None:
        """A DataLoader pass ran to its end."""
        record = getattr(it, "_overt_overlap", None)
        if record is not None and any(r is record for r in self.open):
            self.open = [r for r in self.open if r is not record]
            self._resolve(record)

    def _settle(self) -> None:
        """Passes begun as evaluations that another pass (or the end of the run) follows: resolved."""
        open_, self.open = self.open, []
        for record in open_:
            self._resolve(record)

    def _resolve(self, record: list) -> None:
        """A pass that began as an evaluation (every model in eval mode, or autograd off): with optimizer
        steps in it, it trained; without, it evaluated its data set, compared once with the training one."""
        dataset, step = record
        if self._steps() != step:
            self.train = dataset
            return
        train = self.train
        if train is None or id(dataset) in self.judged or len(self.judged) >= MAX_JUDGED:
            return
        if dataset is train:
            self.judged[id(dataset)] = (dataset, None, "")
            return
        self.judged[id(dataset)] = (dataset, shared_samples(train, dataset, read_items=False), type(train).__name__)

    def end_of_run(self) -> None:
        self._settle()
        overlapping = []
        for dataset, seen, train_name in self.judged.values():
            if seen is None:
                if train_name:  # could not be compared: it may be held out
                    return
                continue  # the training data set itself (training accuracy)
            shared, n, how = seen
            if shared < FAIL_SHARE * max(n, 1):
                return  # a held-out evaluation set exists
            overlapping.append((dataset, shared, n, how, train_name))
        if not overlapping:
            return
        dataset, shared, n, how, train_name = overlapping[0]
        name = type(dataset).__name__
        self.s.report(
            "val-overlaps-train",
            f"the run's evaluation went over a {name} of which {shared} of {n} samples ({shared / max(n, 1):.0%}) "
            f"are samples of the {train_name} it trains on ({how}), and over no data held out from training: the "
            "reported evaluation metrics measure memorisation (a test set loaded from the training split, e.g. "
            "train=True, or validation indices drawn from the training set), not generalisation.",
            fix="evaluate on data disjoint from the training data: load the test split (train=False / split='test'), "
            "or split the data once into disjoint parts (torch.utils.data.random_split, distinct index lists)."
            + (EDGE_FIX if "reverse" in how else MIRROR_FIX if "mirror" in how else ""),
            where=f"evaluation DataLoader over {name}", key="val-overlap",
        )
