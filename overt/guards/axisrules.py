"""What a tensor's shapes and an index say about its axes (the pure part of :mod:`overt.guards.axes`).

No torch here: shapes are tuples of ints and indices are taken apart by what they are, so the rules
are tested on their own.

An axis keeps its meaning through ``reshape``/``view`` only when the reshape splits or merges axes
around it: the number of elements before it in memory order (the product of the sizes in front of
it) is the same in the input and the output.  A size that occurs exactly once in the input shape and
exactly once in the output shape names the same axis on both sides; found at another offset, the
reshape was meant as a permutation, and reshape never moves an axis.
"""

from __future__ import annotations

import itertools
import math
from typing import Any, Sequence

MAX_PERMUTED = 6  # dimensions a suggested permutation is searched over (6! candidates)


def moved_axis(before: Sequence[int], after: Sequence[int]) -> tuple[int, int, int] | None:
    """``(size, dim before, dim after)`` of an axis that a reshape from ``before`` to ``after`` put at
    another offset in memory order, or None.  Only sizes above 1 that occur exactly once in each shape
    are followed (they name one axis on both sides); a reshape that only splits or merges axes keeps
    the product of the sizes in front of every such axis."""
    before, after = tuple(before), tuple(after)
    if len(before) < 2 or len(after) < 2 or math.prod(before) != math.prod(after):
        return None
    for i, size in enumerate(before):
        if size < 2 or before.count(size) != 1 or after.count(size) != 1:
            continue
        j = after.index(size)
        if math.prod(before[:i]) != math.prod(after[:j]):
            return size, i, j
    return None


def _kept(shape: Sequence[int], after: Sequence[int]) -> bool:
    """Whether every size unique in both ``shape`` and ``after`` has the same offset in both."""
    for i, size in enumerate(shape):
        if size >= 2 and shape.count(size) == 1 and after.count(size) == 1:
            if math.prod(shape[:i]) != math.prod(after[:after.index(size)]):
                return False
    return True


def suggested_permutation(before: Sequence[int], after: Sequence[int]) -> tuple[int, ...] | None:
    """The permutation of ``before``'s dimensions (the fewest and shortest moves) after which a reshape
    to ``after`` keeps every axis that :func:`moved_axis` follows, or None (none found, or too many
    dimensions to search)."""
    before, after = tuple(before), tuple(after)
    n = len(before)
    if n > MAX_PERMUTED:
        return None

    def cost(p: tuple[int, ...]) -> tuple[int, int, tuple[int, ...]]:
        # dimensions of equal size kept in their order (H and W of a square image), then the fewest
        # pairs of dimensions swapped
        pairs = [(p[a], p[b]) for a in range(n) for b in range(a + 1, n) if p[a] > p[b]]
        return sum(before[x] == before[y] for x, y in pairs), len(pairs), p

    for p in sorted(itertools.permutations(range(n)), key=cost):
        if p == tuple(range(n)):
            continue
        if _kept(tuple(before[d] for d in p), after):
            return p
    return None


def expand_index(index: Any, ndim: int) -> list[Any] | None:
    """The index element applied to each of a tensor's ``ndim`` dimensions (``slice(None)`` where the
    index says nothing), or None for an index this does not take apart (``None`` or a boolean mask
    among them: they add or fold dimensions).  Elements are ints, slices or other objects (tensors,
    lists) as given."""
    items = list(index) if isinstance(index, tuple) else [index]
    if any(item is None or isinstance(item, bool) or getattr(item, "dtype", None) is not None
           and str(getattr(item, "dtype", "")) == "torch.bool" for item in items):
        return None
    if items.count(Ellipsis) > 1:
        return None
    if Ellipsis in items:
        k = items.index(Ellipsis)
        fill = ndim - (len(items) - 1)
        if fill < 0:
            return None
        items = items[:k] + [slice(None)] * fill + items[k + 1:]
    if len(items) > ndim:
        return None
    return items + [slice(None)] * (ndim - len(items))


def single_tensor_index(index: Any, ndim: int) -> tuple[Any, int] | None:
    """``(tensor, dim)`` when ``index`` is one index tensor (at dimension ``dim``) and otherwise only
    slices, or None."""
    items = expand_index(index, ndim)
    if items is None:
        return None
    tensors = [(item, d) for d, item in enumerate(items) if hasattr(item, "dtype") and hasattr(item, "shape")]
    if len(tensors) != 1 or any(not isinstance(item, slice) for item in items if not hasattr(item, "dtype")):
        return None
    return tensors[0]


def covers_both_halves(item: Any, features: int) -> bool:
    """Whether the index element ``item`` of a feature dimension of size ``features`` keeps features of
    both halves (the forward and the backward direction of a bidirectional RNN's output)."""
    if features < 2 or features % 2:
        return False
    if not isinstance(item, slice):
        return False
    kept = range(*item.indices(features))
    half = features // 2
    return (half - 1) in kept and half in kept
