"""Guard on data sets whose stored data changes when it is read (slug ``data-mutated-by-reading``; issue 33,
invariants of correct training: reading data does not change it).

An invariant of every correct input pipeline: reading a sample leaves the stored data set as it was.  A
``__getitem__`` (or a ``collate_fn``) that normalises or augments the sample in place edits the data set
itself whenever the sample is a view of it (``self.x[i]``, a row of a ``TensorDataset``, a numpy slice):
``img.sub_(mean).div_(std)``, ``img /= 255``, ``img.copy_(img.flip(-1))``.  Every epoch then renormalises or
re-augments the already edited data, training drifts away from what evaluation sees, and the model stops
learning with no error (facebookresearch/pycls#21: "data augmentation in place, causing each call to
__getitem__ ... to modify the loaded dataset permanently", unnoticed while worker processes read copies).

How it is seen, with no work on ordinary steps: at the start of each DataLoader pass read in the main process
(``num_workers=0``), the per-sample arrays the data set holds (``TensorDataset.tensors``; tensor and ndarray
attributes of the data set, or of a data set it wraps, whose first axis has one row per sample) are noted
(a tensor's version counter, host-side; a numpy array's checksum, arrays up to 64 MiB, the first passes only),
and looked at again once the pass's first batch is fetched.  Between the two only the loader's own reading
runs (the sampler, ``__getitem__``, ``collate_fn``): no line of the training loop.  A data set the program
updates on purpose (pseudo-labels rewritten between epochs, targets set in the loop) is written outside that
window and never judged.  A cache filled on first read writes on the first pass only: a finding needs the
reading of two passes to write.  On the pass after the first write, the fetch runs under a
:class:`~torch.overrides.TorchFunctionMode` that notes the user line of the first in-place call whose target
shares memory with the stored data (a numpy write is named at the data set's ``__getitem__``).
Loaders with worker processes are not judged (their writes land in the workers' copies).
"""

from __future__ import annotations

import inspect
import zlib
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from overt.guards.aside import as_user
from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location, user_location

_NUMPY_BYTES = 64 << 20  # numpy arrays checksummed up to this size
_NUMPY_PASSES = 3  # passes over a data set whose numpy arrays are checksummed
_INPLACE_DUNDERS = frozenset({"__setitem__", "__iadd__", "__isub__", "__imul__", "__itruediv__",
                              "__ifloordiv__", "__imod__", "__ipow__", "__iand__", "__ior__", "__ixor__",
                              "__ilshift__", "__irshift__"})


def stored_arrays(ds: Any) -> list[tuple[str, Any]]:
    """(name, array) of the per-sample tensors and numpy arrays ``ds`` (or a data set it wraps, through
    ``.dataset``) holds: ``TensorDataset.tensors`` and attributes whose first axis has one row per sample."""
    try:
        import numpy as np

        nd: tuple[type, ...] = (np.ndarray,)
    except ImportError:  # pragma: no cover - numpy ships with torch's usual installs
        nd = ()
    found: list[tuple[str, Any]] = []
    seen = 0
    while ds is not None and seen < 4:
        seen += 1
        try:
            n = as_user(len, ds)  # the user's __len__
        except Exception:
            n = -1
        owner = type(ds).__name__
        items: list[tuple[str, Any]] = []
        tensors = getattr(ds, "tensors", None)
        if isinstance(tensors, (tuple, list)):
            items += [(f"tensors[{i}]", t) for i, t in enumerate(tensors)]
        if hasattr(ds, "__dict__"):
            items += [(k, v) for k, v in vars(ds).items() if k != "tensors"]
        for attr, value in items:
            if isinstance(value, torch.Tensor):
                if value.requires_grad or value.dim() < 1 or value.numel() == 0:
                    continue
            elif not (nd and isinstance(value, nd)) or value.ndim < 1 or value.size == 0:
                continue
            if n > 1 and value.shape[0] == n:
                found.append((f"{owner}.{attr}", value))
        ds = getattr(ds, "dataset", None)
    return found


def _numpy_sum(a: Any) -> int | None:
    """A checksum of a contiguous numpy array (None: not contiguous, too large, object dtype, a memmap that
    would be read from disk)."""
    if a.nbytes > _NUMPY_BYTES or a.dtype.hasobject or not a.flags.c_contiguous or hasattr(a, "filename"):
        return None
    return zlib.adler32(memoryview(a).cast("B"))


def _fingerprint(arrays: list[tuple[str, Any]], numpy_too: bool) -> list[Any]:
    out: list[Any] = []
    for _, a in arrays:
        if isinstance(a, torch.Tensor):
            out.append(a._version)
        else:
            out.append(_numpy_sum(a) if numpy_too else None)
    return out


class _WriteTracer(TorchFunctionMode):
    """Notes the user line of the first in-place torch call whose target shares memory with ``ptrs``."""

    def __init__(self, ptrs: set[int]):
        super().__init__()
        self.ptrs = ptrs
        self.where: str | None = None
        self.call = ""

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None) -> Any:
        kwargs = kwargs or {}
        if self.where is None and args and isinstance(args[0], torch.Tensor):
            name = getattr(func, "__name__", "")
            inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS
            out = kwargs.get("out")
            target = out if isinstance(out, torch.Tensor) else (args[0] if inplace else None)
            if target is not None:
                try:
                    ptr = target.untyped_storage().data_ptr()
                except Exception:
                    ptr = None
                if ptr in self.ptrs:
                    self.where = user_location(2)
                    self.call = name
        return func(*args, **kwargs)


class DataMutationChecks(Check):
    name = "datamut"

    def __init__(self, session: Any):
        super().__init__(session)
        self.passes: dict[int, int] = {}  # id(dataset) -> passes looked at
        self.wrote: dict[int, int] = {}  # id(dataset) -> passes whose reading wrote into it
        # id(iterator) -> (the stored arrays, their fingerprint) at the pass's start, until its first batch is
        # fetched (collected per pass: an attribute rebound between epochs is followed, the old array not held)
        self.before: dict[int, tuple[list[tuple[str, Any]], list[Any]]] = {}
        self.done: set[int] = set()

    def before_fetch(self, it: Any) -> Any:
        """A main-process DataLoader pass starts, before its first batch is fetched: note the stored data's
        state; returns a tracer to fetch the batch under when the previous pass's reading wrote into it."""
        if getattr(it, "_num_workers", 0):
            return None
        ds = getattr(it, "_dataset", None)
        key = id(ds)
        if ds is None or key in self.done:
            return None
        arrays = stored_arrays(ds)
        if not arrays:
            if key not in self.passes:
                self.done.add(key)  # holds no per-sample arrays (files read from disk, an iterable)
            return None
        n = self.passes[key] = self.passes.get(key, 0) + 1
        self.before[id(it)] = (arrays, _fingerprint(arrays, n <= _NUMPY_PASSES or key in self.wrote))
        if key not in self.wrote:
            return None
        ptrs = set()
        for _, a in arrays:
            if isinstance(a, torch.Tensor):
                try:
                    ptrs.add(a.untyped_storage().data_ptr())
                except Exception:
                    pass
        return _WriteTracer(ptrs) if ptrs else None

    def after_fetch(self, it: Any, tracer: Any) -> None:
        """The pass's first batch was fetched: did its reading change the stored data?"""
        noted = self.before.pop(id(it), None)
        ds = getattr(it, "_dataset", None)
        key = id(ds)
        if noted is None or key in self.done:
            return
        arrays, before = noted
        after = _fingerprint(arrays, any(b is not None and not isinstance(a, torch.Tensor)
                                         for b, (_, a) in zip(before, arrays)))
        changed = [name for (name, _), b, a in zip(arrays, before, after) if b is not None and a != b]
        if not changed:
            if key in self.wrote and self.passes.get(key, 0) >= self.wrote[key] + 3:
                self.done.add(key)  # one pass wrote (a cache filling), three since did not: stop tracing
            return
        k = self.wrote[key] = self.wrote.get(key, 0) + 1
        if k < 2:  # a cache filled on first read writes once: the reading of a second pass must write too
            return
        self.done.add(key)
        where = getattr(tracer, "where", None)
        call = getattr(tracer, "call", "")
        if not where:
            where = _getitem_line(ds) or ""
        name = type(ds).__name__
        if call and where:
            how = f"an in-place {call}() at {where}"
        else:
            how = f"__getitem__ at {where}" if where else "its __getitem__ or collate_fn"
        self.s.report(
            "data-mutated-by-reading",
            f"reading the data set {name} changes its stored data: {', '.join(changed)} was written by {how} while "
            f"the DataLoader fetched a batch, on {k} passes. The sample is a view of the stored data, so every "
            "epoch normalises or augments the already edited data again: training drifts further from what "
            "evaluation sees with each pass, with no error.",
            fix="edit a copy: take the sample with .clone() (numpy: .copy()) before normalising or augmenting it, "
            "or use out-of-place operations (x = (x - mean) / std, x = x.flip(-1)) and transforms that return new "
            "tensors.",
            where=where, key=f"mut:{key}",
        )


def _getitem_line(ds: Any) -> str | None:
    """``file:line`` of the outermost user-defined ``__getitem__`` of ``ds`` or a data set it wraps."""
    seen = 0
    while ds is not None and seen < 4:
        seen += 1
        fn = getattr(type(ds), "__getitem__", None)
        try:
            path = inspect.getsourcefile(fn)
            line = inspect.getsourcelines(fn)[1]
        except (TypeError, OSError):
            path = None
        if path and is_user_file(path):
            return short_location(path, line)
        ds = getattr(ds, "dataset", None)
    return None
