"""Guard on random generators copied into DataLoader workers (slug ``worker-rng-copied``).

A data set that keeps its own random generator (``self.rng = np.random.RandomState(0)``,
``np.random.default_rng()``, ``random.Random()``, ``torch.Generator()``) and draws its
augmentations from it is copied into every worker process: the workers replay the same random
stream (identical "random" augmentations across workers), and without persistent workers every
epoch starts again from the main process's copy (the same augmentations every epoch).  PyTorch
re-seeds the *global* generators of ``random``, NumPy and torch in each worker, never one a data
set holds.  Judged when a DataLoader pass with workers starts (not per batch), on the data set's
own attributes (through ``Subset`` wrappers); a loader with a ``worker_init_fn`` is trusted to
re-seed.
"""

from __future__ import annotations

import random
from typing import Any

import torch


def _generators(ds: Any) -> list[tuple[str, str]]:
    """(attribute, kind) of the random generators ``ds`` (or a data set it wraps) holds."""
    kinds: list[type] = [random.Random, torch.Generator]
    try:
        import numpy as np

        kinds += [np.random.RandomState, np.random.Generator]
    except ImportError:  # pragma: no cover - numpy ships with torch's usual installs
        pass
    found = []
    seen = 0
    while ds is not None and seen < 4:
        seen += 1
        for attr, value in list(vars(ds).items()) if hasattr(ds, "__dict__") else []:
            if isinstance(value, tuple(kinds)):
                found.append((f"{type(ds).__name__}.{attr}", type(value).__name__))
        ds = getattr(ds, "dataset", None)
    return found


def check_worker_rngs(session: Any, it: Any) -> None:
    """At the start of a DataLoader pass (``it``: its iterator) with worker processes."""
    workers = getattr(it, "_num_workers", 0)
    if workers < 1 or getattr(it, "_worker_init_fn", None) is not None:
        return
    ds = getattr(it, "_dataset", None)
    if ds is None or session.reporter.has("worker-rng-copied", f"rng:{id(ds)}"):
        return
    found = _generators(ds)
    if not found:
        return
    attr, kind = found[0]
    persistent = getattr(it, "_persistent_workers", False)
    session.report(
        "worker-rng-copied",
        f"{attr} is a {kind} held by the data set, which a DataLoader with num_workers={workers} copies into "
        f"every worker: the workers draw the same random numbers (identical 'random' augmentations in each "
        f"worker's batches){'' if persistent else ', and each epoch restarts from the same copy, so every epoch repeats them'}. "
        "PyTorch re-seeds only the global generators (random, numpy.random, torch) in workers.",
        fix="draw from the global generators in __getitem__, or re-seed the data set's generator per worker in a "
        "worker_init_fn (e.g. from torch.utils.data.get_worker_info().seed).",
        where=attr, key=f"rng:{id(ds)}",
    )
