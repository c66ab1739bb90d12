"""Guard on training epochs that visit their samples in the order of a quantity the program holds for them
(slug ``unshuffled-training``, widened from a DataLoader written without ``shuffle`` to whatever serves the
training batches; issue 33, session 52's w335).

An invariant of correct training: within an epoch, the order in which the samples reach the model is unrelated to
what they are -- their lengths, labels, scores.  Shuffling is what guarantees it; a loader or sampler that orders
its epoch by a per-sample quantity breaks it without an error: a bucketing batch sampler that sorts by length and
yields the batches in that order (allenai/allennlp#3985), a data set sorted by class read in its stored order, a
hard-example sampler that sorts by the last loss every epoch.  Every epoch then goes from one end of the data to the
other: consecutive batches are alike, and the last updates of every epoch pull the model towards the samples at the
end of the order.

What is looked at, on checked training forwards only:

- the sampler of the latest training DataLoader pass (its ``batch_sampler``, or its ``sampler``), unless it is one
  of torch's random samplers (shuffled by construction);
- objects of the user's frames (locals, the outermost user frame's globals, items of lists, tuples and dicts held
  there) whose class is the user's own and defines ``__iter__``, or that are torch samplers, and whose name does not
  say evaluation (``val``, ``test``, ``eval``, ...): a hand-written batch sampler iterated by the training loop
  itself.  Those must yield batches of integer indices of the size the training forward gets.

Each is iterated once as user code (its attributes and every random generator, its own included, put back): the
epoch's order of indices.  The quantities it could be ordered by are the one-dimensional numeric sequences, one
value per sample, that the sampler, an inner sampler or the data set holds (``lengths``, ``targets``, a
``TensorDataset``'s label tensor).  The epoch is ordered by one when the rank correlation between a sample's place
in the epoch and its value is at least :data:`RHO` in size (a shuffled epoch: about 0; the classes of a data set
sorted by label: 0.87 for two, 0.99 for ten).

Premise, proved or silent:

- the order is seen twice, on looks at least one epoch apart (a later training pass of the loader, or as many
  training steps as the sampler yields batches): a first epoch sorted on purpose (SortaGrad) or a single pass over a
  stream (online learning) is not judged;
- an order that reads the data as stored (consecutive indices) is judged only against labels: a time series read
  in time order, for a stateful model, is correct; a data set sorted by class is not;
- a sampler that says it is a curriculum (its class, its attribute names: ``curriculum``, ``sortagrad``,
  ``competence``, ``pacing``, ``difficulty``), or carries ``shuffle=False`` (the author's decision), is not judged;
- at least :data:`MIN_SAMPLES` distinct indices, covering at least half of the quantity's samples, drawn without
  repeats.

Cost: one iteration of a sampler on the first looked training forward, and again one epoch later for a sampler
found ordered; nothing on other steps.
"""

from __future__ import annotations

import ast
import contextlib
import inspect
import io
import itertools
import random
import re
import sys
import textwrap
import types
import weakref
from typing import Any

import numpy as np
import torch
from torch.utils.data import (BatchSampler, DataLoader, Dataset, DistributedSampler, IterableDataset, RandomSampler,
                              Sampler, Subset, SubsetRandomSampler, TensorDataset, WeightedRandomSampler)

from overt.guards.check import Check
from overt.guards.rerun import rerun
from overt.guards.where import is_user_file, short_location, user_class, user_frames

RHO = 0.8  # |rank correlation| between a sample's place in the epoch and its value
MIN_SAMPLES = 64
MAX_INDICES = 1 << 20  # per epoch; a longer one is not read
MAX_ITEMS = 64  # items of a list, tuple or dict of the user's frames looked at
LOOKS = 2  # checked training forwards on which new candidates are looked for
SEQUENTIAL = 0.5  # share of consecutive indices above which an order reads the data as stored
EVAL_WORDS = ("val", "test", "eval", "dev", "infer", "pred", "score")
_EVAL = re.compile("|".join(EVAL_WORDS), re.IGNORECASE)
DECLARED = ("curriculum", "sortagrad", "competence", "pacing", "difficulty")
LABEL_NAMES = frozenset({"targets", "target", "labels", "label", "y", "ys", "classes", "class_ids", "y_train",
                         "train_labels", "train_targets"})
_RANDOM = (RandomSampler, SubsetRandomSampler, WeightedRandomSampler)


_LIBRARIES = frozenset({"torch", "accelerate", "lightning", "pytorch_lightning", "lightning_fabric", "transformers"})


def _shuffled_within(obj: Any, depth: int = 4) -> bool:
    """Whether ``obj`` or a sampler it wraps (``.sampler``, ``.batch_sampler``: a framework's shard of a batch
    sampler, Accelerate's, Lightning's) draws a random order by construction: torch's random samplers (a
    seedable subclass included), a shuffling ``DistributedSampler``, the engine's ``EpochSampler(shuffle=True)``.
    Such a loader is not iterated: iterating a wrapper moves its epoch and generator state."""
    for _ in range(depth):
        if obj is None:
            return False
        if isinstance(obj, _RANDOM) or (isinstance(obj, DistributedSampler) and obj.shuffle):
            return True
        if type(obj).__module__ == "overt.engine.data" and getattr(obj, "shuffle", False) is True:
            return True
        obj = getattr(obj, "sampler", None) or getattr(obj, "batch_sampler", None)
    return False


def _user_class(cls: type, known: dict[type, bool]) -> bool:
    found = known.get(cls)
    if found is None:
        found = known[cls] = user_class(cls)
    return found


_NEVER = (type, types.ModuleType, types.FunctionType, types.GeneratorType, torch.Tensor, np.ndarray, DataLoader,
          Dataset, str, bytes, *_RANDOM)


def _candidate(obj: Any, known: dict[type, bool], skip: set[type]) -> bool:
    """A hand-written iterable (a sampler the training loop iterates) or one of torch's samplers that is not
    shuffled by construction, holding no stream that iterating it again would advance (an iterator, a file, a
    generator): iterating it here moves nothing the program reads afterwards.  A class whose objects are no
    candidate by their class alone (and are no list, tuple or dict the frames' walk looks into) goes into
    ``skip``: the walk passes over its objects without a call."""
    cls = type(obj)
    if isinstance(obj, _NEVER):
        _never(obj, cls, skip)
        return False
    if isinstance(obj, DistributedSampler) and obj.shuffle:
        return False
    if not isinstance(obj, Sampler):
        if cls.__module__ == "builtins" or not callable(getattr(cls, "__iter__", None)):
            _never(obj, cls, skip)
            return False
        if hasattr(obj, "__next__"):
            return False
        if not _user_class(cls, known):
            _never(obj, cls, skip)
            return False
    return not any(hasattr(v, "__next__") or isinstance(v, (io.IOBase, types.GeneratorType))
                   for v in _attrs(obj).values())


def _never(obj: Any, cls: type, skip: set[type]) -> None:
    if obj.__class__ is cls and not isinstance(obj, _CONTAINERS):  # (an object that names another class: not)
        skip.add(cls)


_CONTAINERS = (dict, list, tuple)


def _ints(v: Any) -> np.ndarray | None:
    """An item of a sampler as an array of integer indices (one index, or a batch of them), or None."""
    if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
        return np.asarray([v], dtype=np.int64)
    if isinstance(v, torch.Tensor):
        if v.is_floating_point() or v.dtype == torch.bool or v.is_complex() or v.dim() > 1:
            return None
        return v.reshape(-1).to("cpu", torch.int64).numpy()
    if isinstance(v, (list, tuple, np.ndarray)) and len(v):
        try:
            a = np.asarray(v)
        except Exception:  # noqa: BLE001  ragged or odd items: no index batch
            return None
        if a.dtype.kind not in "iu" or a.ndim != 1:
            return None
        return a.astype(np.int64, copy=False)
    return None


def _generator_states(obj: Any) -> list[tuple[Any, Any]]:
    """The random generators an object holds (torch, NumPy, Python's), with their states."""
    out: list[tuple[Any, Any]] = []
    for o in (obj, getattr(obj, "sampler", None)):
        if o is None or not hasattr(o, "__dict__"):
            continue
        for v in vars(o).values():
            if isinstance(v, torch.Generator):
                out.append((v, v.get_state()))
            elif isinstance(v, np.random.Generator):
                out.append((v, v.bit_generator.state))
            elif isinstance(v, np.random.RandomState):
                out.append((v, v.get_state()))
            elif isinstance(v, random.Random):
                out.append((v, v.getstate()))
    return out


def _put_back(states: list[tuple[Any, Any]]) -> None:
    for g, state in states:
        if isinstance(g, torch.Generator):
            g.set_state(state)
        elif isinstance(g, np.random.Generator):
            g.bit_generator.state = state
        elif isinstance(g, np.random.RandomState):
            g.set_state(state)
        else:
            g.setstate(state)


def epoch_of(obj: Any) -> tuple[np.ndarray, list[int]] | None:
    """One epoch of ``obj`` as (indices in order, sizes of its items), run as user code with its attributes and
    every random generator put back; None when it yields anything but integer indices."""
    holders = [o for o in (obj, getattr(obj, "sampler", None)) if o is not None and hasattr(o, "__dict__")]
    saved = [(o, dict(vars(o))) for o in holders]
    generators = _generator_states(obj)
    parts: list[np.ndarray] = []
    sizes: list[int] = []
    total = 0
    try:
        with rerun(None, None), torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            it = iter(obj)
            if it is obj:  # its own iterator: drawing from it here would take items from the program
                return None
            for v in it:
                idx = _ints(v)
                if idx is None:
                    return None
                parts.append(idx)
                sizes.append(idx.size)
                total += idx.size
                if total > MAX_INDICES:
                    return None
    except Exception:  # noqa: BLE001  a sampler that cannot be iterated again here: nothing proved
        return None
    finally:
        _put_back(generators)
        for o, state in saved:
            current = vars(o)
            for k in [k for k in current if k not in state]:
                del current[k]
            current.update(state)
    return (np.concatenate(parts), sizes) if total else None


def _numeric(v: Any) -> np.ndarray | None:
    """A one-dimensional numeric sequence as a float array, or None."""
    if type(v).__name__ == "Series" and hasattr(v, "to_numpy"):  # a pandas column
        try:
            v = v.to_numpy()
        except Exception:  # noqa: BLE001
            return None
    if isinstance(v, torch.Tensor):
        if v.dim() != 1 or v.dtype == torch.bool or v.is_complex() or v.device.type == "meta" or v.numel() < 2:
            return None
        return v.detach().to("cpu", torch.float64).numpy()
    if isinstance(v, np.ndarray):
        if v.ndim != 1 or v.dtype.kind not in "iuf" or v.size < 2:
            return None
        return v.astype(np.float64)
    if isinstance(v, (list, tuple)) and len(v) >= 2 and isinstance(v[0], (int, float, np.integer, np.floating)) \
            and not isinstance(v[0], bool):
        if not all(isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) for x in v):
            return None
        return np.asarray(v, dtype=np.float64)
    return None


def _attrs(obj: Any) -> dict[str, Any]:
    try:
        return dict(vars(obj))
    except TypeError:
        return {}


def keys_of(obj: Any, dataset: Any) -> list[tuple[str, np.ndarray, bool]]:
    """(name, values, is a label) for each per-sample quantity the sampler, an inner sampler or the data set
    holds."""
    out: list[tuple[str, np.ndarray, bool]] = []
    for holder in (obj, getattr(obj, "sampler", None)):
        if holder is None:
            continue
        for name, v in _attrs(holder).items():
            a = _numeric(v)
            if a is not None:
                out.append((f"{type(holder).__name__}.{name}", a, name in LABEL_NAMES))
    base, indices = dataset, None
    if isinstance(dataset, Subset):
        base, indices = dataset.dataset, np.asarray(list(dataset.indices), dtype=np.int64)
    if base is not None and not isinstance(base, IterableDataset):
        found: list[tuple[str, np.ndarray, bool]] = []
        if isinstance(base, TensorDataset):
            for k, t in enumerate(base.tensors):
                a = _numeric(t) if k else None  # the first tensor is the input
                if a is not None:
                    found.append((f"TensorDataset.tensors[{k}]", a, not t.is_floating_point()))
        for name, v in _attrs(base).items():
            a = _numeric(v)
            if a is not None:
                found.append((f"{type(base).__name__}.{name}", a, name in LABEL_NAMES))
            elif type(v).__name__ == "DataFrame" and hasattr(v, "select_dtypes"):  # a pandas table's columns
                try:
                    numeric = v.select_dtypes("number")
                    for col in list(numeric.columns)[:MAX_ITEMS]:
                        a = _numeric(numeric[col].to_numpy())
                        if a is not None:
                            found.append((f"{type(base).__name__}.{name}[{col!r}]", a, str(col) in LABEL_NAMES))
                except Exception:  # noqa: BLE001  an unusual table: nothing read from it
                    pass
        for name, a, label in found:
            if indices is not None:
                if indices.size == 0 or indices.max() >= a.size:
                    continue
                a = a[indices]
            out.append((name, a, label))
    return out


def _ranks(a: np.ndarray) -> np.ndarray:
    """Average ranks (ties share theirs)."""
    _, inverse, counts = np.unique(a, return_inverse=True, return_counts=True)
    ends = np.cumsum(counts)
    return ((ends - (counts - 1) / 2.0) - 1)[inverse]


def order_correlation(order: Any, values: np.ndarray) -> float | None:
    """The rank correlation between a sample's place in ``order`` and its value, or None when it cannot be told
    (indices out of range, a constant quantity, too few samples)."""
    p = np.asarray(order, dtype=np.int64)
    if p.size < MIN_SAMPLES or p.min() < 0 or p.max() >= values.size:
        return None
    v = values[p]
    if not np.isfinite(v).all() or np.unique(v).size < 2:
        return None
    x = np.arange(p.size, dtype=np.float64)
    r = _ranks(v)
    x -= x.mean()
    r -= r.mean()
    den = float(np.sqrt((x * x).sum() * (r * r).sum()))
    return float((x * r).sum() / den) if den > 0 else None


def _declared(obj: Any, name: str) -> bool:
    words = [type(obj).__name__.lower(), name.lower()] + [k.lower() for k in _attrs(obj)]
    inner = getattr(obj, "sampler", None)
    if inner is not None:
        words += [type(inner).__name__.lower()] + [k.lower() for k in _attrs(inner)]
    if any(w in text for text in words for w in DECLARED):
        return True
    return any(getattr(o, "shuffle", None) is False for o in (obj, inner) if o is not None)


def _evaluation_name(name: str) -> bool:
    return _EVAL.search(name) is not None


def _hands_out(method: Any) -> int | None:
    """The line of the last ``return``/``yield`` of a user's ``__iter__`` (where its epoch is handed out)."""
    try:
        lines, first = inspect.getsourcelines(method)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError):
        return None
    found = [n.lineno for n in ast.walk(tree) if isinstance(n, (ast.Return, ast.Yield, ast.YieldFrom))]
    return first + max(found) - 1 if found else None


class _Seen:
    """A candidate found ordered on one look: what to compare on the next."""

    __slots__ = ("key", "rho", "step", "due", "passes", "dataset", "bare", "batch")

    def __init__(self, key: str, rho: float, step: int, due: int, passes: int, dataset: Any, bare: bool,
                 batch: int | None):
        self.key, self.rho, self.step, self.due, self.passes = key, rho, step, due, passes
        self.dataset, self.bare, self.batch = dataset, bare, batch


class EpochOrderChecks(Check):
    name = "epochorder"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks = 0
        self.known: dict[type, bool] = {}
        self.skip: set[type] = set()  # classes whose objects are no candidate by their class alone
        self.judged: set[int] = set()  # ids of the candidates judged on a first look
        self.seen: dict[int, tuple[Any, str, _Seen]] = {}  # id -> (object, its name, what the first look saw)
        self.loader: Any = None  # a weak reference to the latest training DataLoader
        self.built: str | None = None
        self.passes = 0  # training passes prepared
        self.prepared_at = 0  # the optimizer steps done when the latest one was prepared

    # -- DataLoader passes (overt/guards/patches.py) ---------------------------------------------------------------
    def prepared(self, it: Any, loader: Any) -> None:
        """A training DataLoader pass was prepared."""
        if loader is None:
            return
        self.passes += 1
        self.prepared_at = self.s.step
        try:
            self.loader = weakref.ref(loader)
        except TypeError:
            self.loader = None
        self.built = getattr(loader, "_overt_built", None)

    # -- looks -----------------------------------------------------------------------------------------------------
    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        if light:
            return
        step = self.s.step
        new = self.looks < LOOKS
        due = [k for k, (_, _, seen) in self.seen.items() if step >= seen.due and self.passes >= seen.passes]
        if not new and not due:
            return
        batch = args[0].shape[0] if args and isinstance(args[0], torch.Tensor) and args[0].dim() else None
        if new:
            self.looks += 1
            for obj, name, dataset, bare in self._candidates(batch):
                if id(obj) not in self.judged:
                    self.judged.add(id(obj))
                    self._first(obj, name, dataset, bare, batch, step)
        for k in due:
            obj, name, seen = self.seen.pop(k)
            self._second(obj, name, seen, step)

    def _candidates(self, batch: int | None) -> list[tuple[Any, str, Any, bool]]:
        """(object, name, data set, found in the user's frames) for each candidate."""
        out: list[tuple[Any, str, Any, bool]] = []
        ref = self.loader() if self.loader is not None else None
        if ref is not None and self.s.step > self.prepared_at:  # a pass the optimizer stepped in: training
            sampler = getattr(ref, "sampler", None)
            bs = getattr(ref, "batch_sampler", None)
            plain_batches = bs is None or type(bs) is BatchSampler
            library = bs is not None and type(bs).__module__.split(".")[0] in _LIBRARIES  # a framework's shard
            shuffled = _shuffled_within(sampler) or (library and _shuffled_within(bs))
            plain_batches = plain_batches or library
            # (the engine's EpochSampler with shuffle=True draws a seeded permutation per epoch: not looked at)
            if not (plain_batches and shuffled) and not isinstance(getattr(ref, "dataset", None), IterableDataset):
                obj = bs if bs is not None else sampler
                if obj is not None:
                    out.append((obj, "the training DataLoader", ref.dataset, False))
        if batch is None:
            return out
        seen = {id(o) for o, _, _, _ in out}
        seen |= {id(getattr(o, "sampler", None)) for o, _, _, _ in out}
        skip = self.skip
        for frame, outermost in user_frames(sys._getframe(1)):
            items = list(frame.f_locals.items())
            if outermost:
                items += list(frame.f_globals.items())
            for name, v in items:
                if type(v) in skip or name.startswith("__") or _evaluation_name(name):
                    continue
                inner = itertools.islice(v.values(), MAX_ITEMS) if isinstance(v, dict) \
                    else v[:MAX_ITEMS] if isinstance(v, (list, tuple)) else (v,)
                for o in inner:
                    if type(o) not in skip and id(o) not in seen and _candidate(o, self.known, skip):
                        seen.add(id(o))
                        data = getattr(o, "data_source", None)
                        out.append((o, name, data if data is not None else getattr(o, "dataset", None), True))
        return out

    def _ordered(self, obj: Any, dataset: Any, bare: bool, batch: int | None) \
            -> tuple[str, float, int, int, bool] | None:
        """(quantity, correlation, items per epoch, samples) when one epoch of ``obj`` is ordered by a quantity."""
        keys = [k for k in keys_of(obj, dataset) if k[1].size >= MIN_SAMPLES]
        if not keys:  # nothing an epoch could be ordered by: not iterated
            return None
        epoch = epoch_of(obj)
        if epoch is None:
            return None
        order, sizes = epoch
        if bare:  # a sampler the loop iterates itself: it must yield the training batches
            if batch is None or max(sizes) < 2 or int(np.median(sizes)) != batch:
                return None
        distinct = int(np.unique(order).size)
        if distinct < MIN_SAMPLES or distinct < 0.95 * order.size:
            return None
        steps = np.diff(order)
        sequential = float((steps == 1).mean()) >= SEQUENTIAL
        best: tuple[str, float] | None = None
        for name, values, label in keys:
            if sequential and not label:
                continue
            if distinct < 0.5 * values.size:
                continue
            rho = order_correlation(order, values)
            if rho is not None and abs(rho) >= RHO and (best is None or abs(rho) > abs(best[1])):
                best = (name, rho)
        if best is None:
            return None
        items = len(sizes) if max(sizes) > 1 or not batch else -(-order.size // batch)
        return best[0], best[1], items, distinct, sequential

    def _first(self, obj: Any, name: str, dataset: Any, bare: bool, batch: int | None, step: int) -> None:
        if _declared(obj, name):
            return
        found = self._ordered(obj, dataset, bare, batch)
        if found is None:
            return
        key, rho, items, _, _ = found
        # looked at again one epoch later: as many steps as the epoch has batches, and (a DataLoader) a later pass
        self.seen[id(obj)] = (obj, name, _Seen(key, rho, step, step + items, self.passes + (0 if bare else 1),
                                               dataset, bare, batch))

    def _second(self, obj: Any, name: str, first: _Seen, step: int) -> None:
        found = self._ordered(obj, first.dataset, first.bare, first.batch)
        if found is None or found[0] != first.key:
            return
        key, rho, _, samples, sequential = found
        self._report(obj, name, key, first, rho, step, samples, sequential)

    def _report(self, obj: Any, name: str, key: str, first: _Seen, rho: float, step: int, samples: int,
                sequential: bool) -> None:
        cls = type(obj)
        method = getattr(cls, "__iter__", None)
        code = getattr(method, "__code__", None)
        user = code is not None and is_user_file(code.co_filename)
        if user:
            where = short_location(code.co_filename, _hands_out(method) or code.co_firstlineno)
            what = (f"the sampler `{name}` ({cls.__name__}, whose __iter__ hands out its epoch at {where}) that the "
                    "training loop draws its batches from")
        else:
            where = self.built or cls.__name__
            what = f"the training DataLoader{' built at ' + self.built if self.built else ''} (its {cls.__name__})"
        direction = "smallest to the largest" if rho > 0 else "largest to the smallest"
        self.s.report(
            "unshuffled-training",
            f"{what} hands out every epoch in the order of {key}"
            + (" (it reads the samples in the order they are stored, and they are stored sorted by it)"
               if sequential else "")
            + f": over the {samples} samples of an epoch, the rank "
            f"correlation between a sample's place in the epoch and its {key} value is {first.rho:.2f} at step "
            f"{first.step} and {rho:.2f} again one epoch later (step {step}), where a shuffled epoch gives about 0. "
            f"Every epoch goes from the {direction} {key} values: consecutive batches are alike, and the last "
            "updates of every epoch pull the model towards the samples at the end of that order (a bias a shuffled "
            "order averages away).",
            fix=("shuffle every epoch: after bucketing samples of similar size into batches, shuffle the list of "
                 "batches before handing them out (random.shuffle(batches)), as a length-bucketing sampler does"
                 if user else "pass shuffle=True to the training DataLoader (or a RandomSampler), so that every "
                 "epoch draws a new random order")
            + ". An order kept on purpose (a curriculum) is better named so in the sampler's class.",
            where=where, key=f"epochorder:{cls.__name__}:{key}")
