"""Guard on a validation set that shares samples with the training set (slug ``val-overlaps-train``).

Judged once when the engine starts training (:func:`overt.guards.setup.check_setup`), never per
step.  Four ways, cheapest first:

* indices: the validation set is the training set itself, or both are ``Subset``\\ s of the same
  data set whose index lists intersect -- exact, no sample is read;
* contents: tensor data sets (``TensorDataset``, a data set holding every sample in one ``.data``
  array as torchvision's MNIST and CIFAR do, or ``Subset``\\ s of one) are compared row by row
  (a digest of each input's bytes); other data sets are compared item by item when both are
  small enough (:data:`MAX_ITEMS`) to read in a moment;
* mirrored images, where rows found fewer than half of the validation samples in training: tensor data sets
  of images (rows of two or more dimensions) whose validation image, flipped left to right, is byte for byte
  a training image (a flip augmentation added before the split) (:func:`mirrored_rows`);
* reversed pairs, where neither way found most validation samples in training: two edge lists (integer
  pairs, ``Subset``\\ s of one included) of a graph whose training list holds its edges both ways (so it is
  undirected): an evaluation edge ``(u, v)`` whose reverse ``(v, u)`` trains is a training sample
  (:func:`reversed_pairs`).

The engine reports an overlap of at least :data:`FAIL_SHARE` of the validation samples (an
error: the validation metrics are meaningless).  A smaller share is left to ``overt doctor``,
which warns with the numbers: natural duplicates (the same short sentence in two sources, as in
the sentiment recipe's data: 9 of 600) make validation only slightly optimistic, and a warning on
every run of such data would be noise.
"""

from __future__ import annotations

import hashlib
from typing import Any

import torch

#: at least this share of validation samples also in training: the validation set is not one
FAIL_SHARE = 0.5
#: generic data sets are compared item by item only up to this many items each
MAX_ITEMS = 5000


def _base(ds: Any) -> tuple[Any, list[int] | None]:
    """(underlying data set, index list or None for all of it), through nested ``Subset``\\ s."""
    from torch.utils.data import Subset

    indices: list[int] | None = None
    while isinstance(ds, Subset):
        idx = [int(i) for i in ds.indices]
        indices = idx if indices is None else [idx[i] for i in indices]
        ds = ds.dataset
    return ds, indices


def _digests(x: torch.Tensor) -> list[bytes]:
    flat = x.detach().cpu().contiguous().reshape(len(x), -1).numpy()
    return [hashlib.blake2b(row.tobytes(), digest_size=16).digest() for row in flat]


def _data_rows(base: Any) -> torch.Tensor | None:
    """The samples of a data set that keeps them all in memory as one array, one row per sample
    (torchvision's MNIST, CIFAR, SVHN: ``.data``), as a tensor; None otherwise."""
    import numpy as np

    data = getattr(base, "data", None)
    if not isinstance(data, (torch.Tensor, np.ndarray)) or data.ndim < 1:
        return None
    if isinstance(data, np.ndarray) and data.dtype.kind not in "biuf":
        return None
    try:
        if len(data) != len(base) or not len(data):
            return None
    except TypeError:
        return None
    return torch.as_tensor(data) if isinstance(data, np.ndarray) else data


def _tensor_rows(ds: Any) -> torch.Tensor | None:
    """The inputs of a data set held in memory (a ``TensorDataset``'s first tensor, a ``.data`` array), one row
    per sample, through ``Subset``\\ s; None for any other data set."""
    from torch.utils.data import TensorDataset

    base, idx = _base(ds)
    if isinstance(base, TensorDataset) and base.tensors:
        rows = base.tensors[0]
    else:
        rows = _data_rows(base)
    if rows is None:
        return None
    return rows if idx is None else rows[torch.as_tensor(idx, dtype=torch.long)]


def mirrored_rows(train: Any, val: Any) -> int | None:
    """How many evaluation images are a training image flipped left to right (or the image itself), when both
    data sets hold images in memory (rows of at least two dimensions, width above one); None otherwise."""
    v, t = _tensor_rows(val), _tensor_rows(train)
    if v is None or t is None or v.ndim < 3 or v.shape[-1] < 2 or t.shape[1:] != v.shape[1:]:
        return None
    known = set(_digests(t))
    width = -2 if v.ndim >= 4 and v.shape[-1] in (1, 3, 4) else -1  # channels last (CIFAR's .data): W is -2
    own = _digests(v)
    flipped = _digests(v.flip(width))
    return sum(a in known or b in known for a, b in zip(own, flipped))


def _inputs(ds: Any, read_items: bool = True) -> list[bytes] | None:
    """One digest per sample's input (first element), or None when it is too costly to tell
    (or, without ``read_items``, when the data set is not made of tensors held in memory)."""
    from torch.utils.data import TensorDataset

    base, idx = _base(ds)
    if isinstance(base, TensorDataset) and base.tensors:
        x = base.tensors[0]
        return _digests(x if idx is None else x[torch.as_tensor(idx, dtype=torch.long)])
    rows = _data_rows(base)
    if rows is not None:
        return _digests(rows if idx is None else rows[torch.as_tensor(idx, dtype=torch.long)])
    if not read_items:
        return None
    try:
        n = len(ds)
    except TypeError:
        return None
    if n > MAX_ITEMS:
        return None
    out = []
    for i in range(n):
        item = ds[i]
        x = item[0] if isinstance(item, (tuple, list)) and item else item
        if not isinstance(x, torch.Tensor):
            return None
        out.append(hashlib.blake2b(x.detach().cpu().contiguous().numpy().tobytes(), digest_size=16).digest())
    return out


def _pairs(ds: Any) -> torch.Tensor | None:
    """The samples as an (N, 2) integer tensor when the data set's inputs are node pairs (a ``TensorDataset``,
    or ``Subset``\\ s of one, whose first tensor is integer with two columns: an edge list), else None."""
    from torch.utils.data import TensorDataset

    base, idx = _base(ds)
    if not (isinstance(base, TensorDataset) and base.tensors):
        return None
    x = base.tensors[0]
    if x.ndim != 2 or x.shape[1] != 2 or x.dtype.is_floating_point or x.dtype.is_complex or x.dtype == torch.bool:
        return None
    return x if idx is None else x[torch.as_tensor(idx, dtype=torch.long)]


def _codes(pairs: Any, width: int) -> Any:
    return pairs[:, 0] * width + pairs[:, 1]


def reversed_pairs(train: Any, val: Any) -> int | None:
    """How many evaluation pairs ``(u, v)`` have ``(v, u)`` (or themselves) among the training pairs, when both
    data sets are edge lists and the training list holds most of its edges both ways (:data:`FAIL_SHARE`, and
    twice what a relation as dense would hold both ways by chance: the graph is undirected, so a pair and its
    reverse are one edge); None otherwise."""
    import numpy as np

    t, v = _pairs(train), _pairs(val)
    if t is None or v is None or not len(t) or not len(v):
        return None
    t, v = t.detach().cpu().long().numpy(), v.detach().cpu().long().numpy()
    if min(t.min(), v.min()) < 0:
        return None
    width = int(max(t.max(), v.max())) + 1
    known = np.unique(_codes(t, width))
    back = np.isin(_codes(t[:, ::-1], width), known)
    # the share of pairs a dense relation would give both ways by chance (user-item pairs: two id spaces)
    chance = len(known) / max(len(np.unique(t[:, 0])) * len(np.unique(t[:, 1])), 1)
    if back.mean() < max(FAIL_SHARE, 2 * chance):
        return None  # a directed list (or pairs of two kinds): (u, v) and (v, u) are two samples
    return int((np.isin(_codes(v, width), known) | np.isin(_codes(v[:, ::-1], width), known)).sum())


#: what to do when the shared samples are reversed edges (added to the fix)
MIRROR_FIX = (" For augmented copies: split the original samples, then add the flipped copies of the training "
              "samples only.")
EDGE_FIX = (" For a graph: split the undirected edges (each once, u < v), then add the reverse of the training "
            "edges only.")


def shared_samples(train: Any, val: Any, read_items: bool = True) -> tuple[int, int, str] | None:
    """(validation samples also in training, validation size, how it was seen), or None when
    the data sets cannot be compared cheaply.  ``read_items=False``: items of data sets that are
    not tensors in memory are never read (reading them would run their transforms and draw from
    the random generators of a run under way)."""
    if train is val:
        n = len(val)
        return n, n, "the validation data set is the training data set"
    tb, ti = _base(train)
    vb, vi = _base(val)
    if tb is vb and (ti is not None or vi is not None):
        tset = set(range(len(tb))) if ti is None else set(ti)
        vidx = list(range(len(vb))) if vi is None else vi
        seen = sum(i in tset for i in vidx), len(vidx), "indices into the same data set"
    else:
        t, v = _inputs(train, read_items), _inputs(val, read_items)
        if t is None or v is None:
            return None
        tset = set(t)
        seen = sum(h in tset for h in v), len(v), "identical inputs (rows compared byte for byte)"
    mirrors = mirrored_rows(train, val) if seen[0] < FAIL_SHARE * seen[1] else None
    if mirrors is not None and mirrors >= FAIL_SHARE * seen[1]:
        return mirrors, seen[1], ("inputs identical to a training input or to its mirror image (flipped left to "
                                  "right, byte for byte): a flipped copy is the same sample")
    edges = reversed_pairs(train, val) if seen[0] < FAIL_SHARE * seen[1] else None
    if edges is not None and edges > seen[0]:
        return edges, seen[1], ("edges (u, v) whose reverse (v, u) is a training edge: the training pairs list "
                                "their edges both ways, so the graph is undirected and a pair and its reverse are "
                                "one edge")
    return seen


def check_overlap(session: Any, train: Any, val: Any) -> None:
    """Report ``val-overlaps-train`` through ``session`` when the two data sets share samples."""
    seen = shared_samples(train, val)
    if seen is None or not seen[0]:
        return
    shared, n, how = seen
    share = shared / max(n, 1)
    if share < FAIL_SHARE:
        return
    session.report(
        "val-overlaps-train",
        f"{shared} of the {n} validation samples ({share:.0%}) are also training samples ({how}): validation "
        "measures memorisation, so its metrics, early stopping and best-checkpoint choice are meaningless.",
        fix="split the data once into disjoint parts (e.g. torch.utils.data.random_split, or distinct index "
        "lists) and de-duplicate it before splitting."
        + (EDGE_FIX if "reverse" in how else MIRROR_FIX if "mirror" in how else ""),
        where="validation data", key="val-overlap",
    )
