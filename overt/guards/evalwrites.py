"""Guard on an evaluation forward that changes what training reads afterwards (slug ``eval-pass-changes-training``).

An invariant of every correct training program: evaluating the model between training steps leaves training
alone.  A forward in eval mode reads the model; the settings training runs with afterwards -- a dropout's rate, a
norm's momentum or epsilon, a module's own switches -- are the ones it had before the evaluation.  A forward that
assigns one of them when ``not self.training`` (NVIDIA/Megatron-LM#411: ``self.dropout_p = 0.0`` in eval mode,
meant for that call only) switches it for the rest of the run: after the first validation pass, training runs
without dropout (or with another momentum, epsilon, scale) even after ``model.train()``, and nothing fails.

Observed on the values, whatever the code's form: the plain Python attributes of every module of a watched model
(floats and booleans; integers only when set to 0, a rate or size switched off; never ``training``) are read
after the first checked training forwards, around the first forward of up to :data:`MAX_PASSES` evaluation passes
(a forward hook of that forward alone) and after the first checked training forward that follows each such pass.
Reported when an attribute that two checked training forwards left at one value is written by the evaluation
forward and still holds the evaluation's value after training has run a forward again.  A value the training
forward puts back (a setting recomputed from ``self.training`` in every forward), one that ``train()`` restores,
one the loop changes between passes (an annealed rate) and one that training forwards change too (a cache, a
counter) stay silent.  Host attributes only: no device value is read, and nothing runs on unchecked steps.

Parameters the same way, by value: around the first :data:`TRAIN_PRINTS` checked training forwards and the
looked-at evaluation forwards, each parameter's sum and sum of absolute values (float64 accumulations on the
device, read with the next checked step's values; models of up to :data:`MAX_ELEMENTS` values).  A parameter an
evaluation forward changed and no training forward did is reported (``.data`` writes included); a constraint
applied in every forward (a clamp in both modes) is written by training too and stays silent.
"""

from __future__ import annotations

import ast
import inspect
import sys
import textwrap
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.where import class_location, is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

SLUG = "eval-pass-changes-training"
MAX_PASSES = 3  # evaluation passes looked at per model
MAX_MODULES = 4096  # modules whose attributes are read per snapshot
MAX_PARAMS = 1024  # parameters fingerprinted around a looked-at forward
MAX_ELEMENTS = 1 << 27  # ... and their values in all (a bigger model's parameters are not fingerprinted)
TRAIN_PRINTS = 2  # checked training forwards whose parameter writes are looked at first
_TORCH_OWN = frozenset(vars(nn.Module()))  # nn.Module's own bookkeeping attributes


def _kept(value: Any) -> bool:
    return type(value) in (float, bool, int)


def snapshot(module: nn.Module) -> dict[tuple[int, str], Any]:
    """``(id(submodule), attribute) -> value`` of the plain number and boolean attributes of every submodule."""
    out: dict[tuple[int, str], Any] = {}
    for i, m in enumerate(module.modules()):
        if i >= MAX_MODULES:
            break
        for attr, value in vars(m).items():
            if attr not in _TORCH_OWN and _kept(value):
                out[(id(m), attr)] = value
    return out


def fingerprint(module: nn.Module) -> tuple[list[nn.Parameter], torch.Tensor] | None:
    """The module's parameters (at most :data:`MAX_PARAMS`) and, per parameter, its sum and sum of absolute
    values, on the device (no read): equal before and after a forward that wrote none of them."""
    params = [p for p in list(module.parameters())[:MAX_PARAMS] if p.is_floating_point()]
    if not params or len({p.device for p in params}) > 1:
        return None
    now = fingerprint_of(params)
    return (params, now) if now is not None else None


def fingerprint_of(params: list) -> torch.Tensor | None:
    """Per parameter, its sum and the sum of its absolute values, accumulated in float64 (no float64 copy)."""
    if sum(p.numel() for p in params) > MAX_ELEMENTS:
        return None
    with torch.no_grad():
        try:
            return torch.stack([torch.stack((q.sum(dtype=torch.float64), q.abs().sum(dtype=torch.float64)))
                                for q in (p.detach() for p in params)])
        except RuntimeError:
            return None


def _switch(before: Any, after: Any) -> bool:
    """Whether ``before -> after`` is a change of a setting (an integer only when it is set to 0)."""
    if type(before) is not type(after) and not (isinstance(before, (int, float)) and isinstance(after, (int, float))):
        return False
    if before == after:
        return False
    if type(after) is int and type(before) is int:
        return after == 0
    return True


def written_at(module: nn.Module, attr: str) -> str | None:
    """``file.py:LINE`` of an assignment ``self.<attr> = ...`` in a method of the module's class other than
    ``__init__`` (where evaluation wrote it), else where the class is defined, else None."""
    cls = type(module)
    try:
        path = inspect.getsourcefile(cls)
        lines, start = inspect.getsourcelines(cls)
    except (OSError, TypeError):
        return None
    if not path or not is_user_file(path):
        return None
    try:
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return class_location(module)
    found: list[tuple[int, int]] = []  # (0 for forward, 1 otherwise; line)
    for fn in ast.walk(tree):
        if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)) or fn.name == "__init__":
            continue
        for node in ast.walk(fn):
            targets: list[Any] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == attr and isinstance(t.value, ast.Name) \
                        and t.value.id == "self":
                    found.append((0 if fn.name == "forward" else 1, node.lineno))
    if not found:
        return class_location(module)
    return short_location(path, start + min(found)[1] - 1)


class _Model:
    __slots__ = ("train", "stable", "passes", "pending", "want_eval", "looked", "prints", "started", "printed",
                 "written")

    def __init__(self) -> None:
        self.train: dict[tuple[int, str], Any] | None = None  # after the latest checked training forward snapped
        self.stable: set[tuple[int, str]] = set()  # attributes two training snapshots agreed on
        self.passes = 0  # evaluation passes looked at
        self.pending: dict[tuple[int, str], tuple[Any, Any]] = {}  # written by evaluation: (training's, evaluation's)
        self.want_eval = False  # the next eval-mode forward begins a pass to look at
        self.looked = False  # a pass was looked at since the latest training snapshot
        self.prints: tuple | None = None  # parameter fingerprint before the training forward under way
        self.started = 0  # training forwards fingerprinted
        self.printed = 0  # training forwards whose parameter writes were read
        self.written: set[int] = set()  # id() of parameters a training forward wrote (written in both modes)


class EvalWriteChecks(Check):
    name = "evalwrites"

    def __init__(self, session: Any):
        super().__init__(session)
        self.models: dict[int, _Model] = {}
        self.look: tuple[Any, dict] | None = None  # (ModelInfo, snapshot before) of the evaluation forward under way
        self.handle: Any = None
        self.stale: list[Any] = []  # hooks of forwards that raised, removed later

    def _done_with(self, info: ModelInfo, st: _Model) -> bool:
        return st.passes >= MAX_PASSES and not st.pending or self.s.reporter.has(SLUG, info.name)

    # -- training forwards: the values training runs with ------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        st = self.models.get(id(info))
        if (st is None or st.started < TRAIN_PRINTS and not self._done_with(info, st)) and self.look is None:
            if st is None:
                if len(self.models) >= 8:
                    return
                st = self.models[id(info)] = _Model()
            st.started += 1
            st.prints = fingerprint(info.module)

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        module = info.module
        if failed or not module.training:
            return
        if not torch.is_grad_enabled():
            return
        st = self.models.get(id(info))
        if st is None:
            if len(self.models) >= 8:
                return
            st = self.models[id(info)] = _Model()
        if st.prints is not None:
            self._compare_prints(st, st.prints, training=True)
            st.prints = None
        if self._done_with(info, st):
            return
        if st.train is not None and st.stable and not st.looked:
            return  # nothing looked at since the latest snapshot: no need to read again
        now = snapshot(module)
        if st.pending:
            self._judge(info, st, now)
            st.pending = {}
        first = st.train is None
        if not first:
            old = st.train
            st.stable = {k for k, v in now.items() if k in old and old[k] == v and type(old[k]) is type(v)}
        st.train, st.looked = now, False
        st.want_eval = bool(st.stable) and st.passes < MAX_PASSES
        if not first and not st.stable:
            st.passes = MAX_PASSES  # nothing training keeps fixed: nothing to compare

    # -- the first forward of an evaluation pass -------------------------------------------------
    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        st = self.models.get(id(info))
        if st is None or not st.want_eval or self.look is not None or self._done_with(info, st):
            return
        st.want_eval, st.looked = False, True
        st.passes += 1
        while self.stale:
            self.stale.pop().remove()
        self.look = (info, snapshot(info.module), fingerprint(info.module) if st.printed >= TRAIN_PRINTS else None)
        self.handle = info.module.register_forward_hook(self._after_eval, always_call=True)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        st = self.models.get(id(info))
        return st is not None and st.want_eval and not self._done_with(info, st)

    def _after_eval(self, module: Any, args: Any, output: Any) -> None:
        look, self.look = self.look, None
        if self.handle is not None:
            if sys.exc_info()[1] is not None:
                self.stale.append(self.handle)  # removing now would cut PyTorch's walk of the hooks short
            else:
                self.handle.remove()
            self.handle = None
        if look is None:
            return
        info, before, prints = look
        st = self.models.get(id(info))
        if st is None:
            return
        if prints is not None:
            self._compare_prints(st, prints, training=False, info=info)
        if st.train is None:
            return
        after = snapshot(info.module)
        for key in st.stable:
            if key not in before or key not in after:
                continue
            trained = st.train[key]
            if before[key] == trained and type(before[key]) is type(trained) and _switch(trained, after[key]):
                st.pending[key] = (trained, after[key])

    def _compare_prints(self, st: _Model, prints: tuple, training: bool, info: Any = None) -> None:
        """Queue the comparison of a fingerprint taken before a forward with one taken now (read with the next
        checked step's values): a training forward's writes are remembered; an evaluation forward's are judged."""
        params, before = prints
        now = fingerprint_of(params)
        if now is None:
            return
        changed = ((now != before) & now.isfinite() & before.isfinite()).any(1)  # a NaN is never "written"
        if training:
            def seen(vals: list[float]) -> None:
                st.printed += 1
                st.written.update(id(p) for p, c in zip(params, vals) if c)
        else:
            def seen(vals: list[float]) -> None:
                moved = [p for p, c in zip(params, vals) if c and id(p) not in st.written]
                if moved:
                    self._report_params(info, moved)
        self.s.defer(changed.float(), seen)

    def _report_params(self, info: ModelInfo, moved: list) -> None:
        names = {id(p): n for n, p in info.module.named_parameters()}
        owner = {id(p): m for m in info.module.modules() for p in m.parameters(recurse=False)}
        first = moved[0]
        m = owner.get(id(first))
        label = f"{info.name}.{names.get(id(first), '?')}"
        more = f" and {len(moved) - 1} more parameter(s)" if len(moved) > 1 else ""
        where = class_location(m) if m is not None else None
        self.s.report(
            SLUG,
            f"an evaluation forward of {info.name} (eval mode) wrote {label}{more} in place, which the training "
            "forwards looked at never do: training continues from the values evaluation left (an update, clamp, "
            "renormalisation or running estimate applied whatever the mode), so the evaluation data change the model "
            "being trained.",
            fix="write parameters only under `if self.training:` (or in the training step), never in an eval-mode "
            "forward; keep a running estimate as a buffer updated in training only.",
            where=f"{label} ({type(m).__name__}" + (f", class at {where})" if where else ")"), key=info.name,
        )

    def _judge(self, info: ModelInfo, st: _Model, now: dict) -> None:
        kept = [(k, v) for k, v in st.pending.items()
                if k in now and type(now[k]) is type(v[1]) and now[k] == v[1]]
        if not kept:
            return
        mods = {id(m): m for m in info.module.modules()}
        (mid, attr), (trained, evald) = kept[0]
        m = mods.get(mid)
        if m is None:
            return
        where = written_at(m, attr)
        label = info.label(m)
        more = ""
        if len(kept) > 1:
            others = [f"{info.label(mods[i])}.{a}" for (i, a), _ in kept[1:] if i in mods]
            more = f" ({len(kept) - 1} more the same way: {', '.join(others[:4])})"
        self.s.report(
            SLUG,
            f"an evaluation forward of {info.name} (eval mode) set {label}.{attr} from {trained!r} to {evald!r}, "
            f"and training runs with {evald!r} since: after model.train() the next training forward still reads "
            f"{evald!r}{more}. Training had kept {attr} at {trained!r}; a setting switched inside an eval-mode "
            "forward (a dropout rate set to 0, a norm's momentum or epsilon) is switched for the rest of the run, "
            "so every epoch after the first evaluation trains another model than configured.",
            fix=f"do not assign self.{attr} in forward: compute the value for this call only "
            f"({attr} if self.training else 0.0) and pass it on, or put it back when training resumes.",
            where=f"{label} ({type(m).__name__}) at {where}" if where else f"{label} ({type(m).__name__}) forward",
            key=info.name,
        )

    def remove_hooks(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        while self.stale:
            self.stale.pop().remove()
