"""Guards on state that is supposed to move (slugs ``load-state-dict-no-effect``,
``snapshot-aliases-weights``).

Two invariants of saving and restoring weights:

- a ``load_state_dict`` changes the model: with ``strict=False``, a state dict whose keys do
  not fit the model (a ``module.``/``model.`` prefix, another architecture) loads nothing and
  PyTorch says nothing; the guard reads the call's own result (missing and unexpected keys);
- a snapshot is a copy: ``best = model.state_dict()`` returns the live tensors, so the "best"
  weights follow the training and restoring or saving them later gives the last weights.  The
  guard tags each top-level ``state_dict()`` with the step and the line it was taken at; a
  snapshot saved (``torch.save``) or loaded after later optimizer steps while its tensors are
  still the model's live ones is reported, as is a ``load_state_dict`` of a model's own live
  tensors (it restores nothing).

The wrappers of ``nn.Module.state_dict``, ``nn.Module.load_state_dict`` and ``torch.save`` are
installed by :func:`install` with the session's other process-wide patches; they cost a few
attribute reads per call and never change what the call does.
"""

from __future__ import annotations

import functools
import weakref
from typing import Any, Callable

import torch
from torch import nn

from overt.guards import ties
from overt.guards.check import Check
from overt.guards.oneshot import OneShotHook
from overt.guards.where import user_location
from overt.text import first_names

#: id(state dict) -> (weak reference to it, its snapshot record), for the state dicts returned by
#: top-level state_dict() calls (an attribute on the dict would be pickled with it by torch.save)
SNAPSHOTS: dict[int, tuple[Any, Any]] = {}


def snapshot_of(state: Any) -> _Snapshot | None:
    """The record of ``state`` if it is a state dict returned by a top-level ``state_dict()``."""
    entry = SNAPSHOTS.get(id(state))
    return entry[1] if entry is not None and entry[0]() is state else None


def _tag(state: Any, snap: _Snapshot) -> None:
    key = id(state)

    def gone(_ref: Any) -> None:
        if SNAPSHOTS.get(key, (None,))[0] is _ref:
            del SNAPSHOTS[key]

    SNAPSHOTS[key] = (weakref.ref(state, gone), snap)


class _Snapshot:
    __slots__ = ("module", "step", "where")

    def __init__(self, module: nn.Module, step: int, where: str):
        self.module = weakref.ref(module)
        self.step = step
        self.where = where


def _own_pointers(module: nn.Module) -> dict[int, str]:
    """data_ptr -> name of the module's parameters and buffers (non-empty ones)."""
    out: dict[int, str] = {}
    for name, t in list(module.named_parameters()) + list(module.named_buffers()):
        if t is not None and t.numel():
            out.setdefault(t.data_ptr(), name)
    return out


def _aliased(state: Any, pointers: dict[int, str]) -> tuple[int, int]:
    """(tensors of ``state`` that are live tensors in ``pointers``, floating tensors of ``state``)."""
    n = same = 0
    for value in state.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point() and value.numel():
            n += 1
            if value.data_ptr() in pointers:
                same += 1
    return same, n


def _prefix(missing: list[str], unexpected: list[str]) -> str | None:
    """A key prefix that the unexpected keys carry and the model's keys do not (``module.``)."""
    wanted = set(missing)
    for key in unexpected:
        for i, ch in enumerate(key):
            if ch == "." and key[i + 1:] in wanted:
                return key[:i + 1]
    for key in missing:  # the other way round: the model's keys carry a prefix the file's lack
        for i, ch in enumerate(key):
            if ch == "." and key[i + 1:] in set(unexpected):
                return "-" + key[:i + 1]
    return None


_SAMPLES = 32  # elements of each loaded parameter remembered, for init-after-load
_REINIT = 0.5  # share of the loaded parameters' elements changed before the first forward


class _Loaded:
    """What a ``load_state_dict`` put in the model's parameters: a few elements of each (device
    tensors), to compare with the parameters at the model's first forward after it."""

    def __init__(self, module: nn.Module, where: str):
        self.name = type(module).__name__
        self.where = where
        self.params: list[tuple[Any, torch.Tensor, torch.Tensor, int]] = []
        with torch.no_grad():
            for p in module.parameters():
                if p.is_floating_point() and p.numel() and p.device.type != "meta":
                    idx = torch.linspace(0, p.numel() - 1, min(p.numel(), _SAMPLES), device=p.device).long()
                    self.params.append((weakref.ref(p), idx, p.detach().reshape(-1)[idx].float().clone(), p.numel()))

    def changed(self) -> tuple[torch.Tensor, list[int]] | None:
        """Per parameter still alive with its shape: whether its remembered elements were replaced (a
        device tensor), and the parameters' sizes; None when none is left."""
        flags, sizes = [], []
        with torch.no_grad():
            for ref, idx, before, n in self.params:
                p = ref()
                if p is None or p.numel() != n or p.device != before.device:
                    continue
                now = p.detach().reshape(-1)[idx].float()
                # re-initialised: the values are another draw (an independent one differs by about 1.4
                # times their size, zeros by 1), not the loaded ones moved (an EMA update, a dtype cast)
                flags.append((now - before).norm() > 0.8 * before.norm() + 1e-6)
                sizes.append(n)
        return (torch.stack(flags), sizes) if flags else None


class StateChecks(Check):
    name = "states"

    def __init__(self, session: Any):
        super().__init__(session)
        self.hooks: dict[int, OneShotHook] = {}  # id(module) -> the hook on its first forward after a load

    def _watch_load(self, module: nn.Module, where: str) -> None:
        """Compare the parameters with what was loaded at the module's first forward after the load
        (the weights are then what training, or evaluation, starts from)."""
        key = id(module)
        hook = self.hooks.get(key)
        if hook is None:
            if len(self.hooks) >= 8:
                return
            hook = self.hooks[key] = OneShotHook()
        load = _Loaded(module, where)

        def first_forward(mod: Any, args: tuple, output: Any) -> None:
            if not hook.fired():
                return
            found = load.changed()
            if found is not None:
                flags, sizes = found
                self.s.defer(flags.float(), self._judge_reinit(load, sizes))

        hook.remove()
        hook.place(module, first_forward)

    def remove_hooks(self) -> None:
        for hook in self.hooks.values():
            hook.remove()

    def _judge_reinit(self, load: _Loaded, sizes: list[int]):
        def callback(vals: list[float]) -> None:
            moved = sum(n for v, n in zip(vals, sizes) if v)
            total = sum(sizes)
            if not total or moved < _REINIT * total:
                return  # a new head initialised after loading a backbone changes a small part
            tensors = sum(1 for v in vals if v)
            at = f"load_state_dict at {load.where}" if load.where else "load_state_dict"
            self.s.report(
                "init-after-load",
                f"{load.name}.load_state_dict() at {load.where or '?'} loaded the model, and at its first forward "
                f"after that {tensors} of its {len(vals)} parameters ({moved} of {total} elements, "
                f"{100 * moved / total:.0f}%) no longer hold the loaded values: something between the load and "
                "training (an init call, reset_parameters(), apply(init_fn)) overwrote the checkpoint, and the run "
                "starts from fresh random weights while it looks resumed.",
                fix="initialise the parameters before load_state_dict (or not at all when a checkpoint is loaded), "
                "and re-initialise only the layers that are new (a replaced head) after it.",
                where=at, key=f"reinit:{load.where}")

        return callback

    def after_load(self, module: nn.Module, state: Any, strict: bool, assign: bool, result: Any,
                   where: str) -> None:
        """After ``module.load_state_dict(state, strict=...)`` returned ``result``."""
        s = self.s
        missing = list(getattr(result, "missing_keys", []) or [])
        unexpected = list(getattr(result, "unexpected_keys", []) or [])
        own = len(module.state_dict())
        loaded = own - len(missing)
        at = f"load_state_dict at {where}" if where else "load_state_dict"
        if own and loaded * 2 >= own:
            self._watch_load(module, where)
        if not strict and own and loaded * 2 < own and (unexpected or loaded == 0):
            prefix = _prefix(missing, unexpected)
            if prefix is None:
                hint = ""
                fix = ("load with strict=True to see which keys do not fit, and load the state dict of the same "
                       "architecture (or map its keys onto the model's).")
            elif prefix.startswith("-"):
                hint = f" (the model's keys start with {prefix[1:]!r}, the state dict's do not)"
                fix = (f"load into the inner module the state dict was saved from (model.{prefix[1:-1]}), "
                       "or prefix its keys.")
            else:
                hint = f" (the state dict's keys start with {prefix!r}, the model's do not)"
                fix = (f"strip the prefix: {{k.removeprefix({prefix!r}): v for k, v in state.items()}}, "
                       "then load with strict=True so that a mismatch raises.")
            s.report(
                "load-state-dict-no-effect",
                f"{type(module).__name__}.load_state_dict(strict=False) loaded {loaded} of the model's {own} "
                f"entries{hint}: {len(missing)} missing ({first_names(missing)}), {len(unexpected)} unexpected "
                f"({first_names(unexpected)}). The rest of the model keeps its current (e.g. random) weights and "
                "nothing says so.",
                fix=fix, where=at, key=f"load:{where}",
            )
            return
        if assign or not isinstance(state, dict):
            return
        same, n = _aliased(state, _own_pointers(module))
        if n and same * 2 > n:
            snap = snapshot_of(state)
            taken = f" (taken at {snap.where}, step {snap.step})" if snap is not None and snap.where else ""
            s.report(
                "snapshot-aliases-weights",
                f"{type(module).__name__}.load_state_dict() was given the model's own live tensors "
                f"({same} of {n}){taken}: it restores nothing. A state_dict() kept as a snapshot (the 'best' "
                "weights) is not a copy: it follows every later optimizer step, so the weights 'restored' are the "
                "last ones.",
                fix="keep a copy: best = copy.deepcopy(model.state_dict()) (or {k: v.detach().clone() for k, v in "
                "model.state_dict().items()}).",
                where=at, key=f"alias:{where}",
            )

    def after_tied_load(self, module: nn.Module, state: Any, tied: list[list[str]], assign: bool,
                        where: str) -> None:
        """After a load of ``module`` whose parameters ``tied`` (groups of names) were shared before it."""
        for loaded, left, differ in ties.broken(module, tied, state):
            self.s.defer(differ.float(), self._judge_untied(module, loaded, left, assign, where))

    def _judge_untied(self, module: nn.Module, loaded: list[str], left: list[str], assign: bool, where: str):
        name = type(module).__name__
        at = f"load_state_dict at {where}" if where else "load_state_dict"

        def callback(vals: list[float]) -> None:
            if not vals[0]:
                return
            how = "assign=True replaced" if assign else "the load replaced"
            self.s.report(
                "load-state-dict-no-effect",
                f"{name}.load_state_dict({'assign=True' if assign else ''}) at {where or '?'} untied weights that "
                f"the model shares: {', '.join(loaded + left)} were one parameter before the load, the state dict "
                f"named {first_names(loaded)} only, and {how} that one with the loaded tensor while "
                f"{first_names(left)} kept the values it had before the load (in a model just built, its random initialisation). The "
                "model now computes with two different weights where it was built to use one, so the loaded model "
                "is half the checkpoint and half random, with no error (strict=False accepts the missing key).",
                fix=f"load without assign=True (an in-place copy keeps the tie), or tie again after loading "
                f"(model.{left[0]} = model.{loaded[0]}, or the model's tie_weights()).",
                where=at, key=f"untied:{where}:{left[0]}",
            )

        return callback

    def before_save(self, obj: Any, where: str) -> None:
        """``torch.save(obj, ...)`` of a state dict tagged by ``state_dict()``."""
        snap = snapshot_of(obj)
        if snap is None or snap.step >= self.s.step:
            return
        module = snap.module()
        if module is None:
            return
        same, n = _aliased(obj, _own_pointers(module))
        if n and same * 2 > n:
            self.s.report(
                "snapshot-aliases-weights",
                f"torch.save() of a state_dict taken at step {snap.step}"
                f"{f' ({snap.where})' if snap.where else ''} saves the weights of step {self.s.step}: "
                f"{same} of its {n} tensors are still the model's live ones, which {self.s.step - snap.step} "
                "optimizer step(s) have changed since. The file does not hold the snapshot it was meant to.",
                fix="take a copy when the snapshot is taken: best = copy.deepcopy(model.state_dict()).",
                where=f"torch.save at {where}" if where else "torch.save", key=f"save:{where}",
            )


def _state_dict_wrapper(active: list, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def state_dict(self: nn.Module, *args: Any, **kwargs: Any) -> Any:
        out = orig(self, *args, **kwargs)
        if active and not args and kwargs.get("destination") is None and isinstance(out, dict):
            try:
                _tag(out, _Snapshot(self, max(s.step for s in active), user_location(2) or ""))
            except TypeError:  # a state dict type that takes no weak reference: no record
                pass
        return out

    return state_dict


def _load_state_dict_wrapper(active: list, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def load_state_dict(self: nn.Module, state_dict: Any, strict: bool = True, assign: bool = False) -> Any:
        tied: list[list[str]] = []
        if active:  # the weights the load replaces (eval-copy-near-initial, overt/guards/evalcopy.py)
            where = user_location(2) or ""
            try:
                tied = ties.groups(self)
            except Exception:  # a module whose parameters cannot be listed: no tie check
                tied = []
            for s in active:
                evalcopy = getattr(s, "evalcopy", None)
                if evalcopy is not None:
                    _safely(s, evalcopy.before_load, self, where)
        result = orig(self, state_dict, strict=strict, assign=assign)
        if active:
            where = user_location(2) or ""
            for s in active:
                _safely(s, s.states.after_load, self, state_dict, strict, assign, result, where)
                if tied:
                    _safely(s, s.states.after_tied_load, self, state_dict, tied, assign, where)
        return result

    return load_state_dict


def _save_wrapper(active: list, orig: Callable) -> Callable:
    @functools.wraps(orig)
    def save(obj: Any, *args: Any, **kwargs: Any) -> Any:
        if active and isinstance(obj, dict) and id(obj) in SNAPSHOTS:
            where = user_location(2) or ""
            for s in active:
                _safely(s, s.states.before_save, obj, where)
        return orig(obj, *args, **kwargs)

    return save


def _safely(session: Any, fn: Callable, *args: Any) -> None:
    try:
        fn(*args)
    except Exception as exc:  # never break the user's call over a check
        session.check_failed(session.states, exc)


def install(patch: Callable, active: list) -> None:
    """Install the wrappers with ``patch(owner, name, make)`` (:func:`overt.guards.patches._patch`)."""
    patch(nn.Module, "state_dict", functools.partial(_state_dict_wrapper, active))
    patch(nn.Module, "load_state_dict", functools.partial(_load_state_dict_wrapper, active))
    patch(torch, "save", functools.partial(_save_wrapper, active))
