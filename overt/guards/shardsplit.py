"""Guard on the samplers of a program's data-parallel ranks whose index lists are no partition of the data set
(slug ``unsharded-sampler``, widened from a loader not split at all to shards that overlap; issue 33, session
51's w340).

An invariant of every correct data-parallel program: in one epoch the ranks' samplers hand out disjoint slices of
one ordering of the data set, so every sample is drawn once by one rank (up to the padding ``DistributedSampler``
adds to make the slices equal: fewer than ``world`` repeats).  Samplers that shuffle with a seed of their own per
rank (a seed derived from the time and the rank, a generator seeded with the rank) cut their slices out of
different permutations: the slices overlap, some samples are drawn by two ranks in the epoch and others by none,
and nothing fails.

What is looked at: on a model's first two checked training forwards, the objects of the user's frames (locals,
module globals, and the items of lists, tuples and dicts held there) whose class is the user's own, defines
``__iter__`` (or that are torch's ``DistributedSampler``) and hold an integer rank (``rank``, ``local_rank``,
``rank_id``, ``shard_id``, ``process_index``) and a world size (``world``, ``world_size``, ``num_replicas``,
``num_shards``, ``replicas``) are grouped by class and world size. A group of two or more distinct ranks is iterated
once each (as user code, the objects' attributes and the random generators put back): when every list holds plain
integer indices and no rank repeats an index of its own (a sampler that draws with replacement, or by weights, is no
partition by design), indices drawn by two or more ranks beyond the padding allowance (``world``) are reported, with
the attributes other than the rank in which the ranks' samplers differ (the seed, mostly). Silent: samplers that say
they draw with replacement, lists of anything but integers, a single rank (a real multi-process run holds one
sampler per process: see ``distributed.py``), ranks whose lists are all disjoint.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import sys
import types
from typing import Any

import numpy as np
import torch
from torch.utils.data import DistributedSampler

from overt.guards.check import Check
from overt.guards.rerun import rerun
from overt.guards.where import short_location, user_class, user_frames

LOOKS = 2
MAX_INDICES = 1 << 20  # per sampler; a longer list is not read
MAX_GROUP = 64
RANK_NAMES = ("rank", "local_rank", "rank_id", "shard_id", "process_index")
WORLD_NAMES = ("world", "world_size", "num_replicas", "num_shards", "replicas")
_SAMPLES_WITH_REPLACEMENT = ("replacement", "with_replacement", "replace")


def _first(obj: Any, names: tuple[str, ...]) -> tuple[str, int] | None:
    for n in names:
        v = getattr(obj, n, None)
        if isinstance(v, (int, np.integer)) and not isinstance(v, bool):
            return n, int(v)
    return None


def _user_iterable(obj: Any, known: dict[type, bool]) -> bool:
    """A user class that iterates (a hand-written sampler), or torch's ``DistributedSampler``; ``known`` caches
    the answer per class."""
    cls = type(obj)
    found = known.get(cls)
    if found is not None:
        return found
    if isinstance(obj, DistributedSampler):
        found = True
    elif isinstance(obj, (type, types.ModuleType, types.FunctionType, torch.Tensor, np.ndarray)) \
            or cls.__module__ == "builtins" or not callable(getattr(cls, "__iter__", None)):
        found = False
    else:
        found = user_class(cls)
    known[cls] = found
    return found


def _indices(obj: Any) -> list[int] | None:
    """One pass of ``obj``'s iteration as plain integers, its attributes put back; None when it is no index list."""
    state = dict(vars(obj)) if hasattr(obj, "__dict__") else None
    out: list[int] = []
    try:
        with rerun(None, None), torch.no_grad(), contextlib.redirect_stdout(io.StringIO()):
            for v in itertools.islice(iter(obj), MAX_INDICES + 1):
                if isinstance(v, torch.Tensor) and v.dim() == 0 and not v.is_floating_point():
                    v = int(v)
                if not isinstance(v, (int, np.integer)) or isinstance(v, bool):
                    return None
                out.append(int(v))
    except Exception:  # noqa: BLE001  a sampler that cannot be iterated again here: nothing proved
        return None
    finally:
        if state is not None:
            current = vars(obj)
            for k in [k for k in current if k not in state]:
                del current[k]
            current.update(state)
    return out if 0 < len(out) <= MAX_INDICES else None


def _differs(objs: list[Any], rank_name: str) -> list[str]:
    """``name (v1, v2, ...)`` for the plain attributes other than the rank whose values differ across ``objs``."""
    out = []
    names = [n for n in vars(objs[0]) if n != rank_name and all(n in vars(o) for o in objs)]
    for n in names:
        vals = [vars(o)[n] for o in objs]
        if all(isinstance(v, (int, float, str, np.integer, np.floating)) and not isinstance(v, bool) for v in vals) \
                and len(set(vals)) > 1:
            out.append(f"{n} ({', '.join(repr(v) for v in vals[:6])}{', ...' if len(vals) > 6 else ''})")
    return out


class ShardSplitChecks(Check):
    name = "shardsplit"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks = 0
        self.done: set[tuple[int, int]] = set()  # (id(class), world) groups judged
        self.known: dict[type, bool] = {}  # class -> whether its objects are candidates (by their class alone)
        self.skip: set[type] = set()  # the classes known not to be, but for lists, tuples and dicts

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        if self.looks >= LOOKS:
            return
        self.looks += 1
        candidates: dict[int, Any] = {}
        skip = self.skip
        for frame, outermost in user_frames(sys._getframe(1)):
            values = list(frame.f_locals.values())
            if outermost:
                values += list(frame.f_globals.values())
            for v in values:
                if type(v) in skip:
                    continue
                inner = list(v.values()) if isinstance(v, dict) else list(v) if isinstance(v, (list, tuple)) \
                    else [v]
                for o in inner[:MAX_GROUP]:
                    if type(o) in skip or id(o) in candidates:
                        continue
                    if _user_iterable(o, self.known):
                        candidates[id(o)] = o
                    elif o.__class__ is type(o) and not isinstance(o, (dict, list, tuple)):
                        skip.add(type(o))  # (its class decides: the walk passes over its objects)
        groups: dict[tuple[int, int], list[Any]] = {}
        for o in candidates.values():
            rank, world = _first(o, RANK_NAMES), _first(o, WORLD_NAMES)
            if rank is None or world is None or world[1] < 2 or not 0 <= rank[1] < world[1] \
                    or any(getattr(o, n, False) is True for n in _SAMPLES_WITH_REPLACEMENT):
                continue
            groups.setdefault((id(type(o)), world[1]), []).append(o)
        for key, objs in groups.items():
            if key in self.done:
                continue
            by_rank = {_first(o, RANK_NAMES)[1]: o for o in objs}  # type: ignore[index]
            if len(by_rank) < 2:
                continue
            self.done.add(key)
            try:
                self._judge(sorted(by_rank.items()), key[1])
            except Exception as exc:  # noqa: BLE001
                self.s.check_failed(self, exc)

    def _judge(self, ranked: list[tuple[int, Any]], world: int) -> None:
        lists = []
        for _, o in ranked:
            idx = _indices(o)
            if idx is None or len(set(idx)) != len(idx):  # no index list, or drawn with replacement: no partition
                return
            lists.append(idx)
        seen: dict[int, int] = {}
        for idx in lists:
            for i in idx:
                seen[i] = seen.get(i, 0) + 1
        shared = sum(1 for c in seen.values() if c > 1)
        if shared <= world:
            return
        drawn = sum(len(x) for x in lists)
        top = max(seen)
        low = min(seen)
        missing = (top - low + 1) - len(seen) if low >= 0 else 0
        objs = [o for _, o in ranked]
        rank_name = _first(objs[0], RANK_NAMES)[0]  # type: ignore[index]
        differs = _differs(objs, rank_name)
        cls = type(objs[0])
        method = cls.__iter__
        code = getattr(method, "__code__", None)
        where = short_location(code.co_filename, code.co_firstlineno) if code is not None else cls.__name__
        ranks = ", ".join(str(r) for r, _ in ranked)
        also = (f" The ranks' samplers differ in {'; '.join(differs)} as well as in {rank_name}: each rank cuts its "
                "slice out of its own ordering.") if differs else ""
        self.s.report(
            "unsharded-sampler",
            f"the {cls.__name__} samplers of ranks {ranks} (world {world}) are no partition of the data: of the "
            f"{len(seen)} indices they hand out in one epoch ({drawn} draws), {shared} are drawn by two or more ranks"
            + (f", and {missing} indices between {low} and {top} by none" if missing > 0 else "")
            + f", where data-parallel ranks draw disjoint slices of one ordering (at most {world - 1} repeats of "
            "padding). Those samples get several times the weight of the others in the epoch and the skipped ones "
            f"are never trained on.{also}",
            fix="give every rank's sampler the same seed and epoch (one shared permutation per epoch; "
                "DistributedSampler(dataset, num_replicas=world, rank=rank, seed=SEED) with sampler.set_epoch(epoch)), "
                "so only the rank decides which slice of it a rank takes",
            where=where, key=f"shards:{cls.__name__}")
