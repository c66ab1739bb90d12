"""Guards on the precision of the training step.

Slugs: ``fp16-without-scaler`` (a backward through float16 autocast with no GradScaler),
``params-not-updating`` (its low-precision form: updates rounded away in bfloat16/float16
parameters that a built-in optimizer steps without float32 master weights),
``optimizer-eps-underflow`` (an epsilon that is 0 in the parameters' dtype, and the step turned
finite weights NaN or inf).

All three are judged on checked steps only:

- a checked training forward of a watched model notes whether float16 autocast is on for the
  model's device type (``torch.is_autocast_enabled``/``get_autocast_dtype``: host state, no
  device read); the optimizer step of that step reports when no enabled ``GradScaler`` scaled a
  loss in the session (``GradScaler.scale`` is wrapped, :mod:`overt.guards.scaler`) and none of a
  class whose ``scale`` the wrapper cannot see is alive.  bfloat16 autocast has float32's exponent
  range and is never judged;
- before a checked step of a ``torch.optim`` optimizer holding bfloat16/float16 parameters, a
  strided sample of those parameters and of where their gradients are non-zero is copied; after
  the step, the share of the sampled elements with a non-zero gradient whose value did not change
  is read at the next flush.  Half or more on two checked steps in a row: the updates are smaller
  than half the spacing between representable values and round away;
- before a checked step of a ``torch.optim`` optimizer (not ``fused``) whose ``eps`` rounds to 0
  in the dtype of parameters it steps, whether their gradients are all finite; after it, whether
  the parameters still are.  Finite gradients in, non-finite weights out: the step divided by
  ``sqrt(v) + eps`` = 0.
"""

from __future__ import annotations

import functools
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.swapped import compiling
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

LOW = (torch.bfloat16, torch.float16)
_PER_PARAM = 256  # sampled elements per parameter
_MAX_PARAMS = 64
_MIN_ELEMENTS = 100  # sampled elements with a non-zero gradient needed to judge
_SHARE = 0.5  # of them unchanged by the step
#: frameworks that scale float16 losses with their own scaler, not torch's GradScaler
_OWN_SCALERS = ("deepspeed", "apex.amp")


def _autocast_fp16(device_type: str) -> bool:
    try:
        return bool(torch.is_autocast_enabled(device_type)) and torch.get_autocast_dtype(device_type) == torch.float16
    except (TypeError, RuntimeError, AttributeError):  # an older torch, or a device type autocast does not know
        return False


def _device_type(module: torch.nn.Module) -> str | None:
    for p in module.parameters():
        return p.device.type
    return None


def _unseen_scalers() -> list:
    """Live GradScalers whose class overrides ``scale`` (FSDP's ``ShardedGradScaler``): the wrapper of
    ``GradScaler.scale`` (:mod:`overt.guards.scaler`) never sees them scale a loss.  Looked for once per
    session, when about to report."""
    import gc

    from torch.amp.grad_scaler import GradScaler

    return [weakref.ref(o) for o in gc.get_objects()
            if issubclass(type(o), GradScaler) and type(o).scale is not GradScaler.scale]


def _enabled(scaler: Any) -> bool:
    try:
        return bool(scaler.is_enabled())
    except Exception:
        return True  # a scaler we cannot read: assume it scales


def _autocast_line(loc: str) -> str | None:
    """``file:line`` of the ``with ...autocast(...)`` that encloses the forward at ``loc`` (the nearest line
    above it, less indented, that names autocast), or None."""
    import linecache

    path, _, line = loc.rpartition(":")
    if not path or not line.isdigit():
        return None
    no = int(line)
    text = linecache.getline(path, no)
    indent = len(text) - len(text.lstrip())
    for i in range(no - 1, max(0, no - 40), -1):
        above = linecache.getline(path, i)
        if not above.strip():
            continue
        ind = len(above) - len(above.lstrip())
        if ind < indent:
            if "autocast" in above and above.lstrip().startswith(("with ", "async with ")):
                return f"{path}:{i}"
            indent = ind
    return None


_CASTS = ("bfloat16", "float16", "half")


def _cast_lines(models: list[torch.nn.Module]) -> str:
    """``file:line`` of the casts of a watched model to low precision in the user's code on the stack
    (``model.to(torch.bfloat16)``, ``model.bfloat16()``, ``model.half()`` on a global name of the calling
    file bound to the model), or ""."""
    import ast

    from overt.guards.where import is_user_file, short_location

    frame = sys._getframe(1)
    while frame is not None and not is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return ""
    # the module's globals only: reading a function frame's f_locals would keep its tensors alive (3.11)
    names = {k for k, v in list(frame.f_globals.items()) if any(v is m for m in models)}
    path = frame.f_code.co_filename
    try:
        with open(path, encoding="utf-8") as fh:
            tree = ast.parse(fh.read())
    except (OSError, SyntaxError, ValueError):
        return ""
    found = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
            continue
        recv = node.func.value
        if not (isinstance(recv, ast.Name) and recv.id in names):
            continue
        attr = node.func.attr
        args = [ast.unparse(a) for a in node.args] + [ast.unparse(k.value) for k in node.keywords]
        if attr in ("bfloat16", "half") or (attr == "to" and any(a.rsplit(".", 1)[-1] in _CASTS for a in args)):
            found.append(short_location(path, node.lineno))
    return ", ".join(f"at {f}" for f in found[:3])


@functools.lru_cache(maxsize=64)
def _vanishes(eps: float, dtype: torch.dtype) -> bool:
    """Whether ``eps`` rounds to 0 in ``dtype`` (a host tensor: no device involved)."""
    return torch.tensor(eps, dtype=dtype).item() == 0.0


def _sample(p: torch.Tensor) -> torch.Tensor:
    flat = p.detach().reshape(-1)
    n = flat.numel()
    if n > _PER_PARAM:
        stride = n // _PER_PARAM
        flat = flat[:_PER_PARAM * stride:stride]
    return flat


class PrecisionChecks(Check):
    name = "precision"

    def __init__(self, session: Any):
        super().__init__(session)
        self.fp16: tuple[int, str, str] | None = None  # (step, model name, forward's location) under fp16 autocast
        self.unseen: list | None = None  # weak references to scalers whose scale() the wrapper cannot see
        self.pending: dict[int, tuple[int, list[torch.Tensor], torch.Tensor, torch.Tensor]] = {}
        self.strikes: dict[int, int] = {}
        self.lrs: dict[int, float] = {}  # the highest learning rate of each optimizer's last judged step
        self.eps: dict[int, tuple[int, list[torch.Tensor], float, str, torch.Tensor]] = {}

    # -- float16 autocast without a scaler ----------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.s.reporter.has("fp16-without-scaler") or compiling():
            return  # (while dynamo traces a compiled forward its hooks run symbolically: nothing to read)
        device_type = _device_type(info.module)
        if device_type is not None and _autocast_fp16(device_type):
            self.fp16 = (self.s.step, info.name, user_location(5) or "")
        elif self.fp16 is not None and self.fp16[1] == info.name:
            self.fp16 = None  # the model's latest training forward ran outside float16 autocast

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self._fp16_step(oi)
        self._snapshot(oi, closure)
        self._eps_before(oi, closure)

    def _fp16_step(self, oi: OptInfo) -> None:
        s = self.s
        if self.fp16 is None or self.fp16[0] != s.step or s.reporter.has("fp16-without-scaler"):
            return
        if any(m in sys.modules for m in _OWN_SCALERS):
            return
        # the scalers that scaled a loss in this session (GradScaler.scale is wrapped), and those whose scale()
        # the wrapper cannot see
        if self.unseen is None:
            self.unseen = _unseen_scalers()
        scalers = [x for x in (ref() for ref in [*s.scalers.scalers, *self.unseen]) if x is not None]
        if any(_enabled(x) for x in scalers):
            return
        if not any(p.grad is not None for p in oi.params):
            return
        _, model, loc = self.fp16
        ctx = _autocast_line(loc)
        disabled = " (a GradScaler exists but is disabled: enabled=False)" if scalers else ""
        s.report(
            "fp16-without-scaler",
            f"{model}'s forward ran under float16 autocast and {oi.name} steps on its gradients without a "
            f"GradScaler{disabled}: float16 gradients below about 6e-8 flush to zero (and lose precision below "
            "6e-5) in the backward pass, so the small gradients vanish and the weights they should move stay "
            "where they are, with no error and no NaN.",
            fix="scale the loss: scaler = torch.amp.GradScaler(); scaler.scale(loss).backward(); "
            "scaler.step(optimizer); scaler.update() -- or autocast to torch.bfloat16, which needs no scaler.",
            where=(f"autocast at {ctx}, " if ctx else "") + f"{model} forward" + (f" at {loc}" if loc else ""),
            key=oi.name,
        )

    # -- updates rounded away in low-precision parameters --------------------------------
    def _judged(self, oi: OptInfo) -> list[torch.Tensor]:
        """The low-precision parameters with a gradient whose update this optimizer applies in their own
        dtype (``torch.optim``'s optimizers keep no float32 master copy), at a learning rate above 0."""
        opt = oi.opt
        if not type(opt).__module__.startswith("torch.optim") or getattr(opt, "_step_supports_amp_scaling", False):
            return []
        for g in opt.param_groups:
            lr = g.get("lr", 0.0)
            lr = float(lr) if not isinstance(lr, torch.Tensor) or lr.numel() == 1 else 1.0
            if not lr > 0:
                return []
        out = [p for p in oi.params if p.dtype in LOW and p.requires_grad and p.grad is not None
               and not p.grad.is_sparse and p.numel()]
        return out[:_MAX_PARAMS]

    def _snapshot(self, oi: OptInfo, closure: bool) -> None:
        if closure or self.s.reporter.has("params-not-updating", f"{oi.name}:rounding"):
            return
        params = self._judged(oi)
        if not params:
            self.pending.pop(id(oi.opt), None)
            return
        values = torch.cat([_sample(p).float() for p in params])  # a copy
        moving = torch.cat([_sample(p.grad).ne(0) & _sample(p.grad).isfinite() for p in params])
        self.pending[id(oi.opt)] = (self.s.step, params, values, moving)

    # -- an epsilon that is zero in the parameters' dtype -----------------------------------
    def _eps_before(self, oi: OptInfo, closure: bool) -> None:
        opt = oi.opt
        if closure or self.s.reporter.has("optimizer-eps-underflow", oi.name) \
                or not type(opt).__module__.startswith("torch.optim"):
            return
        for g in opt.param_groups:
            eps = g.get("eps")
            if not isinstance(eps, float) or eps <= 0 or g.get("fused"):
                continue
            params = [p for p in g["params"] if p.dtype in LOW and p.grad is not None and not p.grad.is_sparse]
            params = [p for p in params if _vanishes(eps, p.dtype)][:_MAX_PARAMS]
            if params:
                finite = torch.stack([p.grad.detach().isfinite().all() for p in params]).all()
                dtype = str(params[0].dtype).replace("torch.", "")
                self.eps[id(opt)] = (self.s.step, params, eps, dtype, finite)
                return

    def _eps_after(self, oi: OptInfo) -> None:
        got = self.eps.pop(id(oi.opt), None)
        if got is None:
            return
        step, params, eps, dtype, finite = got
        broken = torch.stack([p.detach().isfinite().all() for p in params]).logical_not().sum()
        names = [self.s.name_of(p) for p in params]
        s = self.s

        def callback(vals: list[float]) -> None:
            grads_finite, n_broken = bool(vals[0]), int(vals[1])
            if not grads_finite or not n_broken:
                return
            from overt.text import first_names

            bad = [n for n, p in zip(names, params) if not bool(p.detach().isfinite().all())] or names
            s.report(
                "optimizer-eps-underflow",
                f"{oi.name} has eps={eps:g}, which is 0 in {dtype}, the dtype of the parameters it steps; its step "
                f"{s.run_step(step)} took finite gradients and left {n_broken} of {len(params)} parameters with "
                f"NaN or inf values ({first_names(bad)}): the update divides by sqrt(v) + eps computed in {dtype}, "
                "and where a gradient is zero (or its square underflows) that denominator is 0.",
                fix="keep float32 parameters and use torch.autocast with a GradScaler (mixed precision), or give "
                "the optimizer an eps that float16 can hold (1e-4 or more; its smallest value is 6e-8).",
                where=f"{oi.name}, step {s.run_step(step)}", key=oi.name, step=step,
            )

        s.defer(torch.stack((finite.float(), broken.float())), callback)

    def after_checked_step(self, oi: OptInfo) -> None:
        self._eps_after(oi)
        got = self.pending.pop(id(oi.opt), None)
        if got is None:
            return
        step, params, before, moving = got
        after = torch.cat([_sample(p).float() for p in params])
        if after.shape != before.shape:
            return
        stuck = (after == before) & moving
        dtypes = sorted({str(p.dtype).replace("torch.", "") for p in params})
        self.s.defer(torch.stack((stuck.sum(), moving.sum())), self._on_rounding(oi, step, dtypes))

    def _on_rounding(self, oi: OptInfo, step: int, dtypes: list[str]):
        s = self.s

        def callback(vals: list[float]) -> None:
            stuck, moving = int(vals[0]), int(vals[1])
            key = id(oi.opt)
            top = max(float(g.get("lr", 0.0)) for g in oi.opt.param_groups)
            rising = top > self.lrs.get(key, top) * 1.0001  # a warm-up: the updates are meant to be small yet
            self.lrs[key] = top
            if moving < _MIN_ELEMENTS or stuck < _SHARE * moving or rising:
                self.strikes[key] = 0
                return
            self.strikes[key] = self.strikes.get(key, 0) + 1
            if self.strikes[key] < 2:
                return
            lrs = sorted({float(g.get("lr", 0.0)) for g in oi.opt.param_groups})
            lr = ", ".join(f"{x:g}" for x in lrs)
            kind = " and ".join(dtypes)
            cast = _cast_lines([info.module for info in s.models.values()])
            s.report(
                "params-not-updating",
                f"{oi.name} stepped {kind} parameters, and {stuck} of the {moving} sampled elements with a non-zero "
                f"gradient ({stuck / moving:.0%}) kept exactly their value (lr = {lr}; two checked steps in a row): "
                f"each update is smaller than half the spacing between neighbouring {kind} values at that weight "
                f"({kind} keeps {8 if 'bfloat16' in dtypes else 11} significant bits) and rounds away. The model was "
                f"cast to low precision ({cast or 'model.to(torch.bfloat16), .bfloat16(), .half()'}) and the "
                "optimizer has no float32 master copy of the weights.",
                fix="keep the parameters in float32 and run the forward under torch.autocast(device_type, "
                "dtype=torch.bfloat16) (mixed precision), or use an optimizer that keeps float32 master weights or "
                "rounds stochastically.",
                where=f"{oi.name}, step {s.run_step(step)}", key=f"{oi.name}:rounding", step=step,
            )

        return callback
