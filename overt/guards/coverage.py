"""Guards on how much of the data a run covers (slugs ``loader-pass-empty``, ``optimizer-never-steps``,
``eval-samples-repeated``, ``eval-samples-missed``, and the runtime form of ``eval-loop-stops-early``;
issue 33, coverage of the data by training and evaluation).

Two invariants of a correct program, checked once per DataLoader pass or at the end of the run, never
per step:

- **Every pass yields, and a training loop steps.**  A pass over a DataLoader that yields no batch at all
  (``drop_last=True`` with fewer samples than the batch size, an empty file listing, a filter that
  removed every sample, a split fraction that rounds to 0, a sampler with no index) trains or evaluates
  nothing, without an error.  Seen when the pass's first ``next()`` raises ``StopIteration``.  And a run
  that builds an optimizer and runs a training loop (a DataLoader pass with autograd on and the models in
  training mode, or backward passes: gradients on the optimizer's parameters) must take at least one
  optimizer step; seen at the end of the run when no optimizer of the session ever stepped and the
  weights are still those the optimizer was built with (a hand-written update, a checkpoint loaded later:
  quiet).
- **An evaluation pass scores every sample of its data set once.**  For an evaluation pass (autograd off,
  or every watched model in eval mode, when the pass's iterator is made) over a map-style data set with a
  length, the indices its sampler hands out are recorded (a generator around the iterator's sampler
  iterator: a list append per batch, in evaluation passes only).  At the end of a pass:

  * indices handed out twice while others are handed out once (a sampler drawing with replacement,
    ``WeightedRandomSampler`` copied from the training loader, a custom sampler that repeats): the
    repeated samples weigh twice in the metric (``eval-samples-repeated``).  A ``DistributedSampler``
    over several replicas is judged from its sizes (one rank sees only its share): ``total_size`` smaller
    than the data set means ``drop_last`` left samples out on every rank (``eval-samples-missed``).  Its
    padding (the first samples dealt again, pytorch/pytorch#25162) is not judged: a correct program drops
    the repeats when it gathers the results (w62's twin), which no guard sees.  Nor are separate draws:
    a batch sampler of the program's own whose batches each hold distinct indices, in a pass handing out
    fewer indices than the data set holds (few-shot episodes, one random task a batch: the metric is the
    mean over tasks);
  * a batch sampler that hands out fewer indices than its sampler draws (a custom bucket sampler that
    drops its remainders) loses samples (``eval-samples-missed``); ``BatchSampler(drop_last=True)`` is
    ``eval-drops-samples``'s (:mod:`overt.guards.evaldrop`).  A sampler that covers a part of the data set
    (``SubsetRandomSampler(val_idx)``) or a ``Subset`` is the user's choice of evaluation data: silent;
  * every evaluation pass over a data set stopped early, at the same batch (2 or more, fewer than the
    loader has), each having handed out the first samples of the data set in order, and none ran to its
    end: a ``break`` after a fixed number of batches, so the metric covers the first part of the data
    (``eval-loop-stops-early``).  A shuffled loader stopped early is a random subsample, an estimate
    (makemore's ``evaluate(..., max_batches=10)``): not judged, nor an iterator still alive at the end
    (an evaluation that takes a few batches from a kept iterator each time), ``next(iter(loader))`` (one
    batch, to look at) and passes an installed package's loop stops (Lightning's ``limit_val_batches``: a
    setting).

An evaluation pass over an ``IterableDataset`` with a length, in several worker processes, that yields at
least twice the batches its length makes: each worker iterated the whole data set (``eval-samples-repeated``).

Silent for what cannot be told apart from a deliberate choice: data sets without a length (iterable or not),
every index repeated the same number of times (test-time augmentation), indices that are not hashable.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import weakref
from collections import Counter
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

import torch
from torch.utils.data import BatchSampler

from overt.catalog import Severity
from overt.guards.aside import as_user
from overt.guards.check import Check

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

#: evaluation data sets larger than this are not recorded (the indices of one pass are kept on the host)
MAX_RECORDED = 2_000_000


def _recorded(source: Iterator[Any], batches: list[Any]) -> Iterator[Any]:
    """``source`` (the iterator's sampler iterator), with every item it hands out kept in ``batches``."""
    for item in source:
        batches.append(item)
        yield item


@dataclass
class Pass:
    """One DataLoader pass, from its iterator's start (made or reset) to its end: for an evaluation pass over
    a map-style data set, what its sampler handed out."""

    it: Any  # weak reference to the iterator
    evaluation: bool
    built: str | None  # where the DataLoader was made
    key: int = 0  # id of the data set (recorded passes)
    dataset: str = ""  # its type, for messages
    n: int = 0  # its length
    total: int | None = None  # batches the loader has, when known
    workers: int = 0
    batches: list[Any] | None = None  # what the sampler handed out (recorded passes)
    index_sampler: Any = None  # the loader's sampler or batch sampler (until the pass is judged)
    auto_collation: bool = True
    library: bool = False  # started by an installed package's loop (Lightning's), not the user's code
    left_at: str | None = None  # the user's line running when the iterator was dropped before its end (a break)
    ended: bool = False  # ran to StopIteration
    reset: bool = False  # its iterator was reset (a persistent-workers loader) before the end
    steps0: int = 0  # optimizer steps the session had taken when the pass began
    trained: bool = False  # an optimizer stepped during the pass: a training pass after all, not judged


def _weights(opt: torch.optim.Optimizer) -> torch.Tensor | None:
    """A few values of each tensor an optimizer holds (:func:`overt.guards.samples.weight_sample`), once
    when it is built and once at the end of the run: whether its weights moved without it."""
    from overt.guards.samples import weight_sample

    try:
        params = [p for g in opt.param_groups for p in g["params"] if isinstance(p, torch.Tensor)]
        with torch.no_grad():
            return weight_sample(params).cpu() if params else None
    except Exception:  # a parameter on a meta device, a sharded tensor: no sample
        return None


def _dropped(rec: Pass, steps_taken: Any) -> None:
    """An evaluation pass's iterator was freed: before its end, the line that dropped it (a ``break`` leaves
    the loop, CPython frees the iterator at once) is the one running now."""
    if rec.ended:
        return
    rec.trained = rec.trained or steps_taken() > rec.steps0
    try:
        from overt.guards.where import user_location

        rec.left_at = user_location(2)
    except Exception:  # never break the user's program
        rec.left_at = None


def _flat(rec: Pass) -> list[Any]:
    """The indices a pass's sampler handed out, in order."""
    flat: list[Any] = []
    for batch in rec.batches or ():
        if rec.auto_collation:
            flat.extend(batch.tolist() if isinstance(batch, torch.Tensor) else batch)
        else:
            flat.append(batch)
    return flat


def _separate_draws(rec: Pass, index_sampler: Any) -> bool:
    """Whether a pass's batches came from a batch sampler of the program's own (``batch_sampler=``, not
    torch's ``BatchSampler`` over a sampler), each batch holding distinct indices."""
    if not rec.auto_collation or index_sampler is None or isinstance(index_sampler, BatchSampler):
        return False
    try:
        for batch in rec.batches or ():
            items = batch.tolist() if isinstance(batch, torch.Tensor) else list(batch)
            if len(set(items)) < len(items):
                return False
    except TypeError:  # indices that are not hashable, a batch that is not a sequence
        return False
    return bool(rec.batches)


def _from_the_start(rec: Pass) -> bool:
    """Whether a pass handed out the data set's first samples in order (0, 1, 2, ...): a sequential loader."""
    try:
        return all(int(i) == j for j, i in enumerate(_flat(rec)))
    except (TypeError, ValueError):
        return False


def _driven_by_a_library() -> bool:
    """Whether the code that started this pass (the first caller outside torch, overt and the standard
    library) is an installed package (Lightning's evaluation loop, Accelerate), not the user's script: a
    limit it applies (``limit_val_batches``) is a setting the user gave it."""
    from overt.guards.where import from_torch_or_overt_file

    frame = sys._getframe(2)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not from_torch_or_overt_file(filename):
            if any(part in filename for part in _PACKAGE_DIRS):
                return True
            if not filename.startswith(_STDLIB) and not filename.startswith("<frozen"):
                return False  # the user's own code (a script, python -c, a notebook cell)
        frame = frame.f_back
    return False


_PACKAGE_DIRS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
_STDLIB = tuple(p + os.sep for p in {sysconfig.get_paths().get(k, "") for k in ("stdlib", "platstdlib")} if p)


def _where(built: str | None, what: str = "DataLoader") -> str:
    return f"{what} {_at(built)}" if built else what


def _at(built: str | None) -> str:
    """``built at file:line``, or the ``(iterated at file:line)`` of a loader made before the session."""
    return "" if not built else built if built.startswith("(") else f"built at {built}"


class CoverageChecks(Check):
    """Called by :mod:`overt.guards.patches`: ``prepared`` (an iterator made or reset for a pass, with the line
    ``DataLoader.__init__`` noted), ``pass_ended`` (``StopIteration``), ``optimizer_built``."""

    name = "coverage"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.passes: dict[int, list[Pass]] = {}  # id(dataset) -> its recorded evaluation passes
        self.iters: dict[int, Pass] = {}  # id(iterator) -> its pass in progress (or its last)
        self.train_passes = 0  # DataLoader passes begun with autograd on and a model training
        self.empty: list[str] = []  # loaders whose pass yielded nothing (for optimizer-never-steps' message)
        # (an optimizer, where it was built, a sample of its weights then) until some optimizer steps
        self.built: list[tuple[Any, str | None, torch.Tensor | None]] = []

    # -- events --------------------------------------------------------------------------------
    def optimizer_built(self, opt: torch.optim.Optimizer, where: str | None) -> None:
        """Kept (a strong reference: an optimizer built in a function is gone by the end) while no optimizer
        of the run has stepped: after that, nothing of it is judged."""
        if self.s.step:
            self.built.clear()
        elif len(self.built) < 16:
            self.built.append((opt, where, _weights(opt)))

    def prepared(self, it: Any, built: str | None) -> None:
        """A DataLoader iterator was made or reset for a pass (its sampler iterator is fresh)."""
        it._overt_built = built
        previous = self.iters.get(id(it))
        if previous is not None and previous.it() is it and not previous.ended:
            previous.reset = True
            if previous.evaluation:
                self._trained(previous)
        evaluation = not torch.is_grad_enabled() or (
            bool(self.s.models) and not any(info.module.training for info in self.s.models.values()))
        it._overt_eval = evaluation
        rec = Pass(weakref.ref(it), evaluation, built)
        if evaluation:
            rec.steps0 = self.steps_taken()
        if len(self.iters) > 64:
            self.iters = {k: v for k, v in self.iters.items() if v.it() is not None}
        self.iters[id(it)] = rec
        if not evaluation:
            self.train_passes += 1
            return
        from torch.utils.data.dataloader import _DatasetKind

        dataset = getattr(it, "_dataset", None)
        if getattr(it, "_dataset_kind", None) != _DatasetKind.Map or dataset is None:
            return
        try:
            n = as_user(len, dataset)  # the user's __len__
        except Exception:
            return
        if not 0 < n <= MAX_RECORDED:
            return
        try:
            rec.total = len(it)
        except Exception:
            rec.total = None
        rec.key, rec.dataset, rec.n = id(dataset), type(dataset).__name__, n
        rec.workers = getattr(it, "_num_workers", 0)
        rec.batches = []
        rec.index_sampler = getattr(it, "_index_sampler", None)
        rec.auto_collation = bool(getattr(it, "_auto_collation", True))
        rec.library = _driven_by_a_library()
        it._sampler_iter = _recorded(it._sampler_iter, rec.batches)
        weakref.finalize(it, _dropped, rec, self.steps_taken).atexit = False
        if rec.key not in self.passes and len(self.passes) >= 256:  # a data set made per pass: keep the latest
            del self.passes[next(iter(self.passes))]
        passes = self.passes.setdefault(rec.key, [])
        passes.append(rec)
        if len(passes) > 64:  # a long run: the early passes are judged already
            del passes[0]

    def steps_taken(self) -> int:
        """Optimizer steps of the session so far, every optimizer's (none is ever dropped from the session)."""
        return sum(oi.steps for oi in self.s.optimizers.values())

    def _trained(self, rec: Pass) -> bool:
        """Whether an optimizer stepped during a pass classified as evaluation when its iterator was made
        (autograd off, or every model seen so far in eval mode): a pass that trains is no evaluation (a
        library's fit() that builds a new model, not yet seen, after the previous fit left its model in eval
        mode; pytorch-tabnet, session 51).  Its indices are a training sampler's, not judged."""
        if not rec.trained and self.steps_taken() > rec.steps0:
            rec.trained = True
        if rec.trained:
            rec.batches = []
        return rec.trained

    def pass_ended(self, it: Any, yielded: int) -> None:
        """The pass's ``next()`` raised ``StopIteration`` after ``yielded`` batches."""
        rec = self.iters.get(id(it))
        if rec is not None and rec.it() is not it:
            rec = None  # an iterator made before the session
        if rec is not None:
            if rec.ended:
                return
            rec.ended = True
        if not yielded:
            self._empty(it)
            return
        if rec is not None and rec.evaluation and self._trained(rec):
            return
        if rec is not None and rec.evaluation and rec.batches is None:
            self._iterable_repeats(it, rec, yielded)
        if rec is not None and rec.batches is not None:
            if rec.built is None:  # a loader made before the session: the loop that iterated it
                from overt.guards.where import user_location

                loop = user_location(2)
                rec.built = f"(iterated at {loop})" if loop else None
            self._judge(rec)

    def _iterable_repeats(self, it: Any, rec: Pass, yielded: int) -> None:
        """An evaluation pass over an iterable data set with a length, in several worker processes, that
        yielded at least twice the batches its length makes: each worker iterated the whole data set."""
        from torch.utils.data.dataloader import _DatasetKind

        workers = getattr(it, "_num_workers", 0)
        dataset = getattr(it, "_dataset", None)
        if getattr(it, "_dataset_kind", None) != _DatasetKind.Iterable or workers < 2 or dataset is None:
            return
        try:
            n = as_user(len, dataset)  # the user's __len__
        except Exception:
            return  # no length: nothing to compare with
        size = getattr(getattr(it, "_index_sampler", None), "batch_size", None) if getattr(
            it, "_auto_collation", False) else 1
        if not isinstance(size, int) or size < 1:
            return
        expected = n // size if getattr(it, "_drop_last", False) else -(-n // size)  # as len(DataLoader) says
        if expected < 1 or yielded < 2 * expected:
            return
        name = type(dataset).__name__
        times = yielded / expected
        self.s.report(
            "eval-samples-repeated",
            f"an evaluation pass over the DataLoader{' ' + _at(rec.built) if rec.built else ''} yielded {yielded} "
            f"batches where its {name} of {n} samples makes {expected}: each of its {workers} worker processes "
            f"iterated the whole data set (an IterableDataset that does not split itself between workers), so "
            f"every sample was evaluated about {times:.0f} times: a count divided by len(dataset) comes out "
            f"{times:.0f} times too large, and the pass costs {times:.0f} times the work.",
            fix="in __iter__, give each worker its share: info = torch.utils.data.get_worker_info(); iterate "
                "range(info.id, n, info.num_workers) when info is not None (or evaluate with num_workers=0)",
            where=_where(rec.built), key=f"repeated:{id(dataset)}")

    # -- an empty pass ---------------------------------------------------------------------------
    def _empty(self, it: Any) -> None:
        built = getattr(it, "_overt_built", None)
        dataset = getattr(it, "_dataset", None)
        name = type(dataset).__name__
        index_sampler = getattr(it, "_index_sampler", None)
        sampler = getattr(index_sampler, "sampler", index_sampler)
        kind = "evaluation" if getattr(it, "_overt_eval", False) else "training"
        cause, fix = self._empty_cause(dataset, name, index_sampler, sampler)
        from overt.guards.where import user_location

        loop = user_location(3)
        self.empty.append(_where(built))
        self.s.report(
            "loader-pass-empty",
            f"{'an' if kind == 'evaluation' else 'a'} {kind} pass over this DataLoader over {name} yielded no batch: "
            f"{cause}. The loop body never ran, "
            + ("so this pass trained nothing" if kind == "training" else "so nothing was evaluated")
            + ", and no error says so.",
            fix=fix, where=_where(built) + (f", iterated at {loop}" if loop else ""),
            key=built or f"{name}:{id(dataset)}",
            # an empty evaluation shows as a missing or NaN metric (and a run may leave its validation set empty
            # on purpose): a warning; an empty training pass trains nothing: the entry's error
            severity=Severity.WARNING if kind == "evaluation" else None)

    @staticmethod
    def _empty_cause(dataset: Any, name: str, index_sampler: Any, sampler: Any) -> tuple[str, str]:
        try:
            n = as_user(len, dataset)  # the user's __len__
        except Exception:
            n = None
        if n is None:
            return (f"the {name} (an iterable data set) produced no sample",
                    "check what the data set iterates over (an empty listing or a filter that removes everything), "
                    "and in DataLoader workers that each worker gets a share")
        if n == 0:
            return (f"its data set {name} has 0 samples (an empty file listing or glob, a filter that removed every "
                    "sample, a split whose fraction rounds to 0)",
                    "check the path or pattern the data set lists, the filter and the split sizes; fail loudly on an "
                    "empty data set: assert len(dataset) > 0")
        try:
            drawn = len(sampler)
        except Exception:
            drawn = None
        if drawn == 0:
            return (f"its sampler {type(sampler).__name__} hands out no index for the {n} samples of its {name}",
                    "give the sampler the indices to draw (a non-empty index list; num_samples > 0)")
        size = getattr(index_sampler, "batch_size", None)
        if isinstance(index_sampler, BatchSampler) and index_sampler.drop_last and drawn is not None \
                and isinstance(size, int) and drawn < size:
            return (f"drop_last=True with batch_size={size} and {drawn} samples, fewer than one batch: the only, "
                    "partial batch is dropped in every epoch",
                    f"drop_last=False, or a batch_size of at most {drawn}")
        return ("its sampler hands out no batch",
                "check the DataLoader's sampler, batch_sampler and data set sizes")

    # -- a complete evaluation pass --------------------------------------------------------------
    def _judge(self, rec: Pass) -> None:
        index_sampler, rec.index_sampler = rec.index_sampler, None
        draws = _separate_draws(rec, index_sampler)
        flat, rec.batches = _flat(rec), []  # a judged pass keeps nothing of its indices
        if index_sampler is None:
            return
        sampler = getattr(index_sampler, "sampler", index_sampler)
        replicas = getattr(sampler, "num_replicas", 1)
        if isinstance(replicas, int) and replicas > 1 and isinstance(getattr(sampler, "total_size", None), int):
            self._distributed(rec, sampler, replicas)
            return
        try:  # (one Python step per index only where some index is a tensor: types are looked at in C)
            counts = Counter(int(i) if isinstance(i, torch.Tensor) else i for i in flat) \
                if any(issubclass(t, torch.Tensor) for t in set(map(type, flat))) else Counter(flat)
        except TypeError:
            return  # indices that are not hashable: nothing to compare
        if len(counts) < len(flat):
            if draws and len(flat) < rec.n:
                # a batch sampler of the program's own whose every batch is a set of distinct samples, in a
                # pass that hands out fewer indices than the data set holds: not a pass over the set but a
                # few separate draws from it (few-shot episodes: each batch one random task), whose metric is
                # the mean over the draws; a sample in two draws is what independent draws give
                return
            self._repeated(rec, sampler, counts, len(flat))
            return
        if sampler is index_sampler or (isinstance(index_sampler, BatchSampler) and index_sampler.drop_last):
            return  # a sampler's own choice of indices; BatchSampler's drop_last is eval-drops-samples'
        if _sharded_batches(index_sampler):
            return  # each rank batches its share (accelerate's BatchSamplerShard): the others score the rest
        try:
            drawn = len(sampler)
        except Exception:
            return
        if len(flat) < drawn:
            lost = drawn - len(flat)
            self.s.report(
                "eval-samples-missed",
                f"an evaluation pass over the DataLoader{' ' + _at(rec.built) if rec.built else ''} scored "
                f"{len(flat)} of the {drawn} samples its {type(sampler).__name__} draws from the {rec.dataset}: the "
                f"batch sampler {type(index_sampler).__name__} left {lost} of them ({lost / drawn:.0%}) out of every "
                "batch, so the metric is computed on a subset chosen by the batching.",
                fix="make the evaluation batch sampler put every index it is given in a batch (keep a partial last "
                    "batch or bucket), or evaluate with a plain DataLoader(dataset, batch_size=..., shuffle=False)",
                where=_where(rec.built), key=f"missed:{rec.key}")

    def _repeated(self, rec: Pass, sampler: Any, counts: Counter, handed: int) -> None:
        if len(set(counts.values())) == 1 and len(counts) == rec.n:
            return  # every sample the same number of times (test-time augmentation, several crops): unbiased
        twice = sum(1 for c in counts.values() if c > 1)
        extra = handed - len(counts)
        missed = max(rec.n - len(counts), 0)
        sname = type(sampler).__name__
        if getattr(sampler, "replacement", False):
            cause = f"its {sname} draws with replacement"
            fix = ("evaluate with a sampler that hands out each index once: DataLoader(dataset, batch_size=..., "
                   "shuffle=False) (a weighted or replacement sampler belongs to the training loader)")
        else:
            cause = f"its sampler {sname} hands out some indices more than once"
            fix = "evaluate with a sampler that hands out each index of the data set once"
        self.s.report(
            "eval-samples-repeated",
            f"an evaluation pass over the DataLoader{' ' + _at(rec.built) if rec.built else ''} handed out "
            f"{handed} indices of the {rec.n} samples of its {rec.dataset}: {twice} samples were scored more than "
            f"once ({extra} repeats)" + (f" and {missed} not at all" if missed else "")
            + f" because {cause}. The metric weighs those samples several times, so it is not the metric over the "
            "evaluation set and it changes with the draw.",
            fix=fix, where=_where(rec.built), key=f"repeated:{rec.key}")

    def _distributed(self, rec: Pass, sampler: Any, replicas: int) -> None:
        """A sampler that deals the data set to several ranks, judged from its sizes (this rank sees only its
        share).  Padding (``total_size`` above the data set's length: the first samples dealt again so that
        every rank gets as many) is not judged: a correct program drops the repeats when it gathers the
        results (cut to ``len(dataset)``, or put back at their indices), and nothing here sees that."""
        total, name = sampler.total_size, type(sampler).__name__
        if total < rec.n:
            lost = rec.n - total
            self.s.report(
                "eval-samples-missed",
                f"the evaluation DataLoader{' ' + _at(rec.built) if rec.built else ''} deals the {rec.n} samples "
                f"of its {rec.dataset} to {replicas} ranks with a {name}(drop_last=True): {lost} samples are left "
                "out on every rank, so the metric covers a subset that changes with the world size.",
                fix=f"{name}(dataset, shuffle=False) without drop_last for evaluation, and drop the padded repeats "
                    "when the results are gathered (keep the first len(dataset), or put each result at its index)",
                where=_where(rec.built), key=f"missed:{rec.key}")

    # -- the end of the run ----------------------------------------------------------------------
    def end_of_run(self) -> None:
        self._stopped_early()
        self._never_stepped()

    def _stopped_early(self) -> None:
        for every in self.passes.values():
            recs = [r for r in every if not r.trained]  # (a pass that ran to its end is judged already)
            for r in recs:  # a loop that stops at len(loader) without asking for more (Lightning's): complete
                if not r.ended and r.total is not None and len(r.batches or ()) >= r.total:
                    r.ended = True
                    if not self._trained(r):
                        self._judge(r)
            recs = [r for r in recs if not r.trained]
            if not recs or any(r.ended for r in every):
                continue
            left = [r for r in recs if r.reset or r.it() is None]  # abandoned, not paused
            if len(left) < len(recs):
                continue
            stops = {len(r.batches or ()) for r in left}
            rec = left[-1]
            k = len(rec.batches or ())
            if len(stops) != 1 or k < 2 or rec.total is None or k >= rec.total or rec.workers or rec.library:
                continue  # with workers, the batches drawn include the ones prefetched; a library's limit is a setting
            if not all(_from_the_start(r) for r in left):
                continue  # a shuffled loader stopped early: a random subsample, an estimate (makemore's max_batches)
            places = {r.left_at for r in left}
            at = places.pop() if len(places) == 1 else None
            self.s.report(
                "eval-loop-stops-early",
                f"every evaluation pass over the DataLoader{' ' + _at(rec.built) if rec.built else ''} "
                f"({len(left)} pass{'es' if len(left) > 1 else ''}) was left{' at ' + at if at else ''} after {k} of "
                f"its {rec.total} batches had "
                f"been fetched: the other {rec.total - k} batches of the {rec.n} samples of its {rec.dataset} were "
                "never scored, so the metric covers the first part of the evaluation data only (a break after a "
                "fixed number of batches, a debugging limit left in).",
                fix="remove the break (evaluate every batch), or make the limit an explicit setting and say in the "
                    "reported metric that it covers a subset",
                where=_where(rec.built) + (f", left at {at}" if at else ""), key=f"early:{rec.key}")

    def _never_stepped(self) -> None:
        s = self.s
        if s.step:
            return  # some optimizer stepped
        seen: dict[int, tuple[torch.optim.Optimizer, str | None, torch.Tensor | None]] = {}
        for opt, where, before in self.built:
            seen.setdefault(id(opt), (opt, where, before))
        for oi in s.optimizers.values():
            seen.setdefault(id(oi.opt), (oi.opt, None, None))
        for opt, where, before in seen.values():
            params = [p for g in opt.param_groups for p in g["params"] if getattr(p, "requires_grad", False)]
            if not params:
                continue
            after = _weights(opt)
            if before is not None and (after is None or after.shape != before.shape or not torch.equal(before, after)):
                continue  # the weights moved all the same: an update written by hand, a checkpoint loaded
            graded = sum(1 for p in params if p.grad is not None)
            if not graded and not self.train_passes:
                continue  # no training loop ran: an evaluation-only run that builds an optimizer
            name = type(opt).__name__
            if self.empty:
                why = f"the training DataLoader yielded no batch ({self.empty[0]}: see loader-pass-empty)"
            elif graded:
                why = (f"backward passes ran ({graded} of its {len(params)} trainable parameters hold a gradient) but "
                       "step() was never reached: the condition around it never held (an accumulation window longer "
                       "than the loop, a step counter compared with the wrong value)")
            else:
                why = "the training loop ran no step: its body never reached optimizer.step()"
            s.report(
                "optimizer-never-steps",
                f"the {name}{' built at ' + where if where else ''} never took a step in this run: {why}. The model "
                "keeps its initial weights and everything evaluated or saved afterwards is the untrained model.",
                fix="make sure the training loop runs (a non-empty training loader) and that optimizer.step() is "
                    "reached: check its condition, and assert the step count after training",
                where=f"{name} built at {where}" if where else name, key=f"never:{id(opt)}")
            return


def _sharded_batches(index_sampler: Any) -> bool:
    """Whether the batches may be shared out among processes: a batch sampler that says so
    (``num_processes`` > 1, accelerate's ``BatchSamplerShard``) or any batch sampler under an
    initialised process group of more than one rank (what this rank does not see, another may score)."""
    processes = getattr(index_sampler, "num_processes", 1)
    if isinstance(processes, int) and processes > 1:
        return True
    from overt.torchrun import Topology  # the owner of process identity

    return Topology.of_group().world_size > 1
