"""Guard on evaluation outputs that depend on the rest of the batch (slug ``batch-dependent-eval``).

An invariant of every correct model in eval mode: a sample's output does not depend on the other
samples of its batch.  Whatever mixes the batch breaks it: a reduction or normalisation over the
batch dimension (``softmax(dim=0)``, ``x - x.mean(0)``), a ``view`` that folds batch and time
together where a ``transpose`` was meant, a BatchNorm that normalises with the batch's own
statistics (``track_running_stats=False``), a pooling that reads the padding of sequences padded
to the batch's longest.

For padded token inputs (a 2-D integer tensor with a mask argument marking the same positions, or
an embedding whose ``padding_idx`` is the pad value) the shortest half of the batch is first run
with only the padding its own longest sequence needs.  Otherwise, once per model, on an eligible
evaluation forward (eval mode, a batch of at least :data:`MIN_BATCH` samples along dimension 0 of
every tensor argument and of an output), the first half of the batch is run again on its own and
compared with the first half of the batch's outputs; where dimension 0 is known to be the loader's
batch (the size of the DataLoader pass under way), the last half too, since an operation that runs
along dimension 0 in order (a recurrent layer without ``batch_first``, a cumulative sum) leaves the
first samples unchanged.  When they differ, the whole batch is run
once more with the random generator where the first extra forward left it, to rule out randomness
(which other checks name); then each submodule's inputs and outputs in the
two runs locate the cause: the first layer whose output differs while its input did not (a layer
that mixes the batch), or the code of the parent's ``forward`` before the first layer whose input
already differs.  The extra forwards run under ``no_grad`` with the random generator, the buffers
and every module attribute put back afterwards: the user's run is unchanged.  Never on a
training step.

An evaluation under ``no_grad`` that never calls ``eval()`` is probed too when the model's forward is
provably the same in both modes (:func:`mode_free`): then training mode is how it predicts, and the
two runs compare like with like.  The probe is placed when the user's code enters ``no_grad``
(:meth:`IndependenceChecks.no_grad_entered`, at most :data:`TRIES` placements per model).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.aside import user_code
from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.probeargs import fresh
from overt.guards.putback import ModelState
from overt.guards.samerows import close as _close
from overt.guards.samerows import tensors as _tensors
from overt.guards.smallbatch import TrainShapes, small_batch
from overt.guards.smallbatch import probe as small_probe
from overt.guards.where import class_location, is_user_file, short_location
from overt.modefree import MODE_FREE_IF_SET, MODE_FREE_LAYERS

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

MIN_BATCH = 4  # samples along dimension 0
TRIES = 20  # evaluation forwards looked at per model before giving up (none eligible)


def _mode_words(info: ModelInfo) -> str:
    if not info.module.training:
        return "in eval mode"
    return ("in an evaluation under no_grad with the model still in training mode (none of its layers behaves "
            "differently in eval mode, so this is how it predicts)")


def _forward_at(info: ModelInfo) -> str:
    """`` at file.py:LINE`` of the user's ``forward`` of the watched model, or ''."""
    code = getattr(type(info.module).forward, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return ""
    return f" at {short_location(code.co_filename, code.co_firstlineno)}"


def module_forward(info: ModelInfo) -> Any:
    """The watched module's own forward (its hooks, the guards' among them, are not run)."""
    return info.module.forward


def _sample_list(value: Any) -> bool:
    """A list or tuple of at least :data:`MIN_BATCH` tensors: with more than 8, a batch given as a list of
    samples (e.g. sequences of their own lengths), sliced as a list when its length is the batch's."""
    return (isinstance(value, (list, tuple)) and len(value) >= MIN_BATCH
            and all(isinstance(v, torch.Tensor) for v in value))


def _plain(value: Any, depth: int = 0) -> bool:
    """A forward argument the probe can slice: tensors (nested in tuples, lists, dicts), lists of samples
    and scalars."""
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)) and depth < 2:
        return all(isinstance(v, torch.Tensor) for v in value) and (len(value) <= 8 or _sample_list(value))
    if isinstance(value, dict) and depth < 2:
        return all(_plain(v, depth + 1) for v in value.values())
    return False


def _slice(value: Any, batch: int, k: int, start: int = 0) -> Any:
    """``value`` with every tensor batched along dimension 0 cut to samples ``start`` .. ``start + k``."""
    if isinstance(value, torch.Tensor):
        return value[start:start + k] if value.dim() and value.shape[0] == batch else value
    if _sample_list(value) and len(value) == batch > 8:  # (a tuple of up to 8 is arguments, each sliced)
        return value[start:start + k]
    if isinstance(value, tuple):
        return tuple(_slice(v, batch, k, start) for v in value)
    if isinstance(value, list):
        return [_slice(v, batch, k, start) for v in value]
    if isinstance(value, dict):
        return {key: _slice(v, batch, k, start) for key, v in value.items()}
    return value


def _batch_slice(full: torch.Tensor, part: torch.Tensor, batch: int, k: int, start: int = 0) -> torch.Tensor | None:
    """The part of ``full`` (a tensor of the whole batch's run) that belongs to samples ``start`` ..
    ``start + k``, when the batch sits in the one dimension where the two runs' shapes differ."""
    if full.dim() != part.dim():
        return None
    dims = [d for d in range(full.dim()) if full.shape[d] != part.shape[d]]
    if not dims:
        return full if full.dim() == 0 or batch == k else None
    if len(dims) != 1 or full.shape[dims[0]] != batch or part.shape[dims[0]] != k:
        return None
    return full.narrow(dims[0], start, k)


def _folded_slices(full: torch.Tensor, part: torch.Tensor, batch: int, k: int, start: int = 0) -> list[torch.Tensor]:
    """The parts of ``full`` that belong to samples ``start`` .. ``start + k`` when the batch was folded with
    another dimension of size ``c`` into one (``batch * c`` rows in the whole run, ``k * c`` in the part): sample-
    major (``reshape(b * c, ...)`` of ``(b, c, ...)``) and sample-minor (of ``(c, b, ...)``) orders.  Empty when the
    shapes say no such fold."""
    if full.dim() != part.dim() or not full.dim():
        return []
    dims = [d for d in range(full.dim()) if full.shape[d] != part.shape[d]]
    if len(dims) != 1:
        return []
    d = dims[0]
    n, m = full.shape[d], part.shape[d]
    if batch <= k or n % batch or m % k or n // batch != m // k or n // batch < 2:
        return []
    c = n // batch
    major = full.narrow(d, start * c, k * c)
    shape = full.shape[:d] + (c, batch) + full.shape[d + 1:]
    minor = full.reshape(shape).narrow(d + 1, start, k).reshape(part.shape)
    return [major, minor]


def _same_rows(full: torch.Tensor, part: torch.Tensor, batch: int, k: int, start: int = 0) -> bool:
    """Whether ``part`` (the probe's run on samples ``start`` .. ``start + k``) is that slice of ``full``, with the
    batch in its own dimension or folded with another one."""
    f = _batch_slice(full, part, batch, k, start)
    if f is not None:
        return _close(part, f)
    return any(_close(part, g) for g in _folded_slices(full, part, batch, k, start))


class _Recorder:
    """Each submodule's first input and output tensors, in call order, during one forward."""

    def __init__(self, root: nn.Module):
        self.calls: list[tuple[nn.Module, torch.Tensor | None, torch.Tensor | None]] = []
        self.handles = [m.register_forward_hook(self._hook) for m in root.modules() if m is not root]

    def _hook(self, module: nn.Module, args: Any, output: Any) -> None:
        ins, outs = _tensors(args), _tensors(output)
        self.calls.append((module, ins[0].detach() if ins else None, outs[0].detach() if outs else None))

    def remove(self) -> None:
        for h in self.handles:
            h.remove()


#: torch.nn classes the probe knows (containers, the mode-free layers, those that are with some settings)
_MODE_FREE = MODE_FREE_LAYERS | MODE_FREE_IF_SET | {"Sequential", "ModuleList", "ModuleDict",
                                                    "NonDynamicallyQuantizableLinear"}
#: names in a module's own code that make its forward depend on the mode
_MODE_NAMES = frozenset({"training", "dropout", "alpha_dropout", "feature_alpha_dropout", "dropout1d", "dropout2d",
                         "dropout3d", "batch_norm", "instance_norm", "rrelu", "train", "eval"})


def _code_names(code: Any, depth: int = 0) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if hasattr(const, "co_names") and depth < 4:
            names |= _code_names(const, depth + 1)
    return names


def _class_reads_mode(cls: type) -> bool:
    """Does code of ``cls`` (its own methods and those of its bases up to nn.Module) read the mode or call
    functional dropout / batch norm?  Unknown code (a method without Python code) counts as reading it."""
    for klass in cls.__mro__:
        if klass is nn.Module or klass is object:
            break
        for value in vars(klass).values():
            func = getattr(value, "__func__", value)
            if isinstance(value, property):
                func = value.fget
            code = getattr(func, "__code__", None)
            if code is not None and _code_names(code) & _MODE_NAMES:
                return True
    return False


def mode_free(root: nn.Module) -> bool:
    """Is ``root``'s forward provably the same in training and eval mode?  Every submodule is a torch.nn
    layer known to behave the same (dropout with p=0, BatchNorm/InstanceNorm without running statistics,
    attention and recurrent layers without dropout) or a class outside torch.nn whose code never reads the
    mode nor calls functional dropout or batch norm.  Anything else (a Transformer layer, whose eval mode
    takes another path) cannot be proven: False."""
    for m in root.modules():
        cls = type(m)
        if cls.__module__.startswith("torch.nn."):
            name = cls.__name__
            if name not in _MODE_FREE:
                return False
            if name.startswith(("Dropout", "AlphaDropout", "FeatureAlphaDropout")) and getattr(m, "p", 1) > 0:
                return False
            if name.startswith(("BatchNorm", "InstanceNorm")) and getattr(m, "track_running_stats", True):
                return False
            if name in ("MultiheadAttention", "LSTM", "GRU", "RNN") and getattr(m, "dropout", 1) > 0:
                return False
        elif cls.__module__.startswith("torch.") or _class_reads_mode(cls):
            return False
    return True


class IndependenceChecks(Check):
    name = "independence"

    def __init__(self, session: Any):
        super().__init__(session)
        self.tries: dict[int, int] = {}  # id(ModelInfo) -> evaluation forwards looked at
        self.hook = OneShotHook()
        self.running = False
        self.mode_free: dict[int, bool] = {}  # id(ModelInfo) -> its forward is the same in both modes
        self.block_armed: dict[int, tuple[ModelInfo, Any]] = {}  # id(user no_grad block) -> its placement
        self.shapes = TrainShapes()  # the first input's shapes on checked training forwards
        self.small_done: set[int] = set()  # id(ModelInfo) of models whose small-batch evaluation was probed
        self.small_seen: dict[int, tuple[int, ...]] = {}  # id(ModelInfo) -> the last small evaluation input's shape

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        self.shapes.record(info, args)

    def _mode_free(self, info: ModelInfo) -> bool:
        known = self.mode_free.get(id(info))
        if known is None:
            known = self.mode_free[id(info)] = not info.dropbn and not info.compiled and mode_free(info.module)
        return known

    def no_grad_entered(self, block: object = None) -> bool:
        """A ``no_grad``/``inference_mode`` block of the user's code was entered: an evaluation pass may
        run a model still in training mode.  A model whose forward is provably the same in both modes
        (:func:`mode_free`) gets the probe on its next forward, as if it were in eval mode; at most
        :data:`TRIES` placements per model over the run, never on a model with Dropout or BatchNorm.
        True when a placement was made for ``block``: its exit (:meth:`no_grad_exited`) takes it back if
        the block ran no forward of the model (an EMA update under ``no_grad`` spends no try)."""
        if self.running or self.hook.pending:
            return False
        for info in self.s.models.values():
            if info.module.training and self.tries.get(id(info), 0) < TRIES and self._mode_free(info) \
                    and not self.s.reporter.has("batch-dependent-eval", info.name):
                self._arm(info, train_mode=True)
                if block is None or not self.hook.pending:
                    return False
                self.block_armed[id(block)] = (info, self.hook.handle)
                return True
        return False

    def no_grad_exited(self, block: object) -> bool | None:
        """The user's block that :meth:`no_grad_entered` armed has exited: whether a forward came to the
        placement (None if the block armed nothing).  A placement no forward used is removed and its try
        given back."""
        armed = self.block_armed.pop(id(block), None)
        if armed is None:
            return None
        info, handle = armed
        if self.hook.handle is not handle:
            return True  # fired in the block (and perhaps placed again since)
        self.hook.remove()
        self.tries[id(info)] = max(0, self.tries.get(id(info), 0) - 1)
        return False

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._arm(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._arm(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        return self.tries.get(id(info), 0) < TRIES and not self.s.reporter.has("batch-dependent-eval", info.name)

    def _arm(self, info: ModelInfo, train_mode: bool = False) -> None:
        self.hook.clear_stale()
        if self.running or self.hook.pending or (info.module.training and not train_mode):
            return
        n = self.tries.get(id(info), 0)
        if n >= TRIES or self.s.reporter.has("batch-dependent-eval", info.name):
            return
        self.tries[id(info)] = n + 1
        self.hook.place(info.module, self._after(info), with_kwargs=True)

    def _after(self, info: ModelInfo):
        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if not self.hook.fired():
                return
            if output is None or module.training and (torch.is_grad_enabled() or not self._mode_free(info)):
                return  # training mode: only an evaluation (no_grad) of a model the mode does not change
            try:
                self._probe(info, args, kwargs, output)
            except Exception as exc:  # a guard never breaks the user's forward
                self.s.check_failed(self, exc)

        return hook

    def _eligible(self, args: tuple, kwargs: dict, output: Any) -> int | None:
        values = list(args) + list(kwargs.values())
        if not all(_plain(v) for v in values):
            return None  # e.g. a list of lengths or strings per sample: it could not be sliced
        lists = [v for v in values if _sample_list(v) and len(v) > 8]
        if lists:  # the batch is a list of samples: its length, the same for every list and tensor
            batch = len(lists[0])
            batched = [t for t in _tensors([v for v in values if not _sample_list(v)]) if t.dim()]
            if any(len(v) != batch for v in lists) or any(t.shape[0] != batch for t in batched):
                return None
        else:
            inputs = _tensors(values)
            batched = [t for t in inputs if t.dim()]
            if not batched:
                return None
            batch = batched[0].shape[0]
            if batch < MIN_BATCH or any(t.shape[0] != batch for t in batched):
                return None
        loader = self.s.loader_batch_size
        if loader is not None and batch != loader:
            return None  # dimension 0 may not be the loader's batch (time-first inputs, a last batch)
        outs = [t for t in _tensors(output) if t.dim() and t.shape[0] == batch and t.is_floating_point()]
        return batch if outs else None

    def _probe(self, info: ModelInfo, args: tuple, kwargs: dict, output: Any) -> None:
        batch = self._eligible(args, kwargs, output)
        if batch is None:
            self._small(info, args, kwargs, output)
            return
        self.tries[id(info)] = TRIES  # one probe per model
        module, k = info.module, batch // 2
        saved = ModelState(module, info.param_device)
        try:
            if self._padding_probe(info, args, kwargs, output, batch, k):
                return
        finally:
            saved.restore()
            saved.restore_rng()
        # the first half, then (where dimension 0 is known to be the loader's batch) the last half: a
        # recurrence or cumulative operation run along the batch leaves the first samples unchanged
        starts = (0, batch - k) if self.s.loader_batch_size == batch else (0,)
        self.running = True
        try:
            with torch.no_grad(), user_code():  # the user's model runs again: as the user's code runs
                full = [t for t in _tensors(output) if t.dim() and t.shape[0] == batch and t.is_floating_point()]
                for start in starts:
                    try:
                        part = module.forward(*fresh(_slice(args, batch, k, start)), **fresh(_slice(kwargs, batch, k, start)))
                    except Exception:  # noqa: BLE001  a forward that cannot take half a batch: nothing to compare
                        return
                    mine = [t for t in _tensors(part) if t.dim() and t.shape[0] == k and t.is_floating_point()]
                    if len(mine) != len(full):
                        return
                    if not all(_close(a, b[start:start + k]) for a, b in zip(mine, full)):
                        break
                else:
                    return
                # the outputs differ: rule out randomness (the whole batch again, with the random
                # generator where the first extra forward left it), then locate the cause
                rec_full = _Recorder(module)
                try:
                    again = module.forward(*fresh(args), **fresh(kwargs))
                finally:
                    rec_full.remove()
                again_t = [t for t in _tensors(again) if t.dim() and t.shape[0] == batch and t.is_floating_point()]
                if len(again_t) != len(full) or not all(_close(a, b) for a, b in zip(again_t, full)):
                    return  # not deterministic: dropout-always-on or a random layer, named elsewhere
                if self._context_argument(module, args, kwargs, batch, k, start, full):
                    return
                rec_part = _Recorder(module)
                try:
                    module.forward(*fresh(_slice(args, batch, k, start)), **fresh(_slice(kwargs, batch, k, start)))
                finally:
                    rec_part.remove()
        finally:
            self.running = False
            saved.restore()
            saved.restore_rng()
        where, cause = self._cause(info, rec_full.calls, rec_part.calls, batch, k, start)
        self.s.report(
            "batch-dependent-eval",
            f"{_mode_words(info)}, the outputs of {info.name} for the {'first' if start == 0 else 'last'} {k} "
            f"samples of a "
            f"batch of {batch} change when "
            f"those samples are run on their own: {cause}. A prediction then depends on which other samples share "
            "its batch (and on the batch size), so evaluation metrics and predictions are wrong.",
            fix="keep every operation per sample: softmax/normalise over the feature dimension (dim=-1), "
            "permute with transpose/permute rather than view/reshape, BatchNorm with its running statistics "
            "(track_running_stats=True), recurrent layers with batch_first=True for (batch, time, ...) inputs.",
            where=where, key=info.name,
        )

    @staticmethod
    def _context_argument(module: nn.Module, args: tuple, kwargs: dict, batch: int, k: int, start: int,
                          full: list) -> bool:
        """Whether one of two or more batch-sized tensor arguments is a set every sample reads whole (a matching
        network's support set, a memory, the keys of a retrieval) rather than more samples: kept whole while the
        others are cut, the cut samples' outputs are then the batch's own.  A support set that happens to hold as
        many rows as the queries is no batch, and cutting it proves nothing (oscarknagg/few-shot's matching
        network, session 53's fresh8 public scripts)."""
        names = [("a", i) for i, v in enumerate(args) if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == batch]
        names += [("k", key) for key, v in kwargs.items()
                  if isinstance(v, torch.Tensor) and v.dim() and v.shape[0] == batch]
        if len(names) < 2:
            return False
        for kind, which in names:
            a2 = tuple(v if (kind, i) == ("a", which) else _slice(v, batch, k, start) for i, v in enumerate(args))
            k2 = {key: v if (kind, key) == ("k", which) else _slice(v, batch, k, start) for key, v in kwargs.items()}
            try:
                part = module.forward(*fresh(a2), **fresh(k2))
            except Exception:  # noqa: BLE001  the arguments must be cut together: they are all samples
                continue
            mine = [t for t in _tensors(part) if t.dim() and t.shape[0] == k and t.is_floating_point()]
            if len(mine) == len(full) and all(_close(a, b[start:start + k]) for a, b in zip(mine, full)):
                return True
        return False

    def _small(self, info: ModelInfo, args: tuple, kwargs: dict, output: Any) -> None:
        """An evaluation forward of 1 .. 3 rows (too few to cut in two): the rows alone against the same rows
        tiled to a batch (:mod:`overt.guards.smallbatch`), once per model, where dimension 0 is provably the
        batch, on the second of two evaluation forwards in a row with inputs of this shape."""
        if id(info) in self.small_done or not all(_plain(v) for v in list(args) + list(kwargs.values())):
            return
        batch = small_batch(args, kwargs, output)
        x = next((a for a in args if isinstance(a, torch.Tensor)), None)
        if batch is None or x is None or not self.shapes.batch_first(info, x):
            self.small_seen.pop(id(info), None)  # two small forwards in a row, nothing between them
            return
        shape = tuple(x.shape)
        if self.small_seen.get(id(info)) != shape:  # the same small batch twice in a row, not a sequence that grows
            self.small_seen[id(info)] = shape
            return
        self.small_done.add(id(info))
        self.running = True
        try:
            small_probe(self.s, info, args, kwargs, output, batch, _mode_words(info))
        finally:
            self.running = False

    def _padding_probe(self, info: ModelInfo, args: tuple, kwargs: dict, output: Any, batch: int, k: int) -> bool:
        """Token inputs padded to the batch's longest sequence: run the ``k`` shortest sequences with
        the padding their own batch would have (trailing pad columns trimmed); a sequence's output
        must not change.  True when it was run (and reported if it changed).  Not run when the batch is
        padded beyond its longest sequence: a fixed pad size, the same padding whatever the batch holds."""
        ids = next((t for t in _tensors(list(args) + list(kwargs.values())) if t.dim() == 2), None)
        if ids is None or ids.is_floating_point() or ids.dtype == torch.bool or ids.shape[1] < 2:
            return False
        pad = ids[:, -1].min()
        real = ids != pad
        if bool(real.all()):  # one read of the host copy: token ids come from the host
            return False
        # padded sequences, not integer features: a mask argument that marks the same positions, or an
        # embedding whose padding_idx is the pad value
        masked = any(t is not ids and t.shape == ids.shape and bool(((t != 0) == real).all())
                     for t in _tensors(list(args) + list(kwargs.values())))
        padding_idx = any(isinstance(m, nn.Embedding) and m.padding_idx is not None and m.padding_idx == int(pad)
                          for m in info.module.modules())
        if not masked and not padding_idx:
            return False
        positions = torch.arange(1, ids.shape[1] + 1, device=ids.device)
        lengths = (real * positions).amax(1)
        if int(lengths.max()) < ids.shape[1]:
            # no sequence reaches the last position: the batch is padded to a fixed size, not to its longest,
            # so no sequence's padding depends on the others' lengths (a model that reads the padding reads the
            # same padding in every batch); the half-batch probe still looks at the other ways to mix a batch
            return False
        order = torch.argsort(lengths, stable=True)[:k]
        width = int(lengths[order].max())
        if width >= ids.shape[1] or width < 1:
            return False
        length = ids.shape[1]

        def cut(value: Any, trim: bool = True) -> Any:
            if isinstance(value, torch.Tensor) and value.dim() and value.shape[0] == batch:
                value = value[order]
                return value[:, :width] if trim and value.dim() >= 2 and value.shape[1] == length else value
            if isinstance(value, tuple):
                return tuple(cut(v, trim) for v in value)
            if isinstance(value, list):
                return [cut(v, trim) for v in value]
            if isinstance(value, dict):
                return {key: cut(v, trim) for key, v in value.items()}
            return value

        full = [t for t in _tensors(output) if t.dim() and t.shape[0] == batch and t.is_floating_point()]
        if not full or any(t.dim() >= 2 and t.shape[1] == length for t in full):
            return False  # per-position outputs: their length changes with the padding
        self.running = True
        try:
            with torch.no_grad(), user_code():  # the user's model runs again: as the user's code runs
                try:
                    part = module_forward(info)(*cut(args), **cut(kwargs))
                except Exception:  # noqa: BLE001  the model cannot take a shorter padding: nothing to compare
                    return True
                mine = [t for t in _tensors(part) if t.dim() and t.shape[0] == k and t.is_floating_point()]
                if len(mine) != len(full) or all(_close(a, b[order]) for a, b in zip(mine, full)):
                    return True
                # the same sequences with the batch's full padding: changed too, then it is not the padding
                # but the other samples (lengths kept in another order, a reduction over the batch)
                untrimmed = module_forward(info)(*cut(args, False), **cut(kwargs, False))
                same = [t for t in _tensors(untrimmed) if t.dim() and t.shape[0] == k and t.is_floating_point()]
                if len(same) != len(full) or not all(_close(a, b[order]) for a, b in zip(same, full)):
                    return False  # the half-batch probe names it
        finally:
            self.running = False
        at = _forward_at(info)
        self.s.report(
            "batch-dependent-eval",
            f"{_mode_words(info)}, the outputs of {info.name} for the {k} shortest sequences of a batch of {batch} "
            f"(padded "
            f"to {length} positions) change when they are padded only to their own longest ({width}): the model "
            "reads the padding, so a sequence's prediction depends on how long the other sequences of its batch "
            "are.",
            fix="mask the padding wherever the forward reduces over positions (pool with the attention mask, "
            "key_padding_mask in attention, pack_padded_sequence for RNNs).",
            where=f"{info.name}.forward{at}", key=info.name,
        )
        return True

    def _cause(self, info: ModelInfo, full: list, part: list, batch: int, k: int,
               start: int = 0) -> tuple[str, str]:
        if len(full) != len(part):
            return f"{info.name} forward", "the two runs took different paths through the model"
        for (m, fin, fout), (m2, pin, pout) in zip(full, part):
            if m is not m2:
                break
            same_in = True
            if fin is not None and pin is not None:
                same_in = _same_rows(fin, pin, batch, k, start)
            label = info.label(m)
            if not same_in:
                at = _forward_at(info)
                return (f"{info.name}.forward{at}, before {label}",
                        f"the input of {label} ({type(m).__name__}) already mixes samples: the code of the forward "
                        f"before it moves values across the batch (a view/reshape that folds the batch with "
                        f"another dimension, an operation over dimension 0, or rows kept by counts computed from "
                        f"the whole batch, such as the sequences still running at each step, in another order "
                        f"than the rows)")
            if fout is not None and pout is not None:
                if not _same_rows(fout, pout, batch, k, start):
                    source = getattr(sys.modules.get(type(m).__module__), "__file__", None) or "<"
                    loc = class_location(m) if is_user_file(source) else None
                    detail = ""
                    if isinstance(m, nn.modules.batchnorm._BatchNorm) and not m.track_running_stats:
                        detail = " (track_running_stats=False: it normalises with the batch's own statistics)"
                    elif isinstance(m, nn.RNNBase) and not m.batch_first:
                        detail = (" (batch_first=False: it reads dimension 0 as time, so its recurrence runs across "
                                  "the samples of the batch; pass batch_first=True for (batch, time, features) inputs)")
                    elif isinstance(m, (nn.Softmax, nn.LogSoftmax, nn.Softmin)) and m.dim in (0, None):
                        detail = f" (dim={m.dim}: it normalises over the batch)"
                    return (f"{label}" + (f" ({type(m).__name__} at {loc})" if loc else ""),
                            f"{label} ({type(m).__name__}) mixes the samples of its batch{detail}")
        at = _forward_at(info)
        return (f"{info.name}.forward{at}, after its last layer",
                "the code of the forward after its last layer mixes the samples (an operation over dimension 0, "
                "e.g. softmax(dim=0) or a normalisation by the batch's statistics)")

    def remove_hooks(self) -> None:
        self.hook.remove()
