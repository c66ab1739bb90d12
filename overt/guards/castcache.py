"""Guard on forwards that read autocast's cached copy of a weight that changed since (slug
``autocast-stale-weights``; issue 33).

An invariant of every correct program: a forward computes with the weights as they are now.  Inside a
``torch.autocast`` region with its cast cache on (the default), the low-precision copy of a float32 leaf
tensor that requires grad -- every parameter -- is made the first time an op casts it and is served from
the cache until the outermost autocast region exits.  A region that stays open across an optimizer step
(one ``with torch.autocast(...)`` around the whole loop, or around a step followed by another forward)
serves every later forward the copies of the weights from before the step: the parameters change, the
model's outputs do not, and the loss stays flat with no error (X-GenGroup/Flow-Factory#186).  Any in-place
change of a weight inside such a region is read the same way (an EMA or reference swap, a SAM
perturbation, weight clipping between two forwards).

What is proven, on checked steps only (host state and tiny casts; the sentinel is read at once, the
parameters' comparison with the session's deferred reads):

- after a checked step taken while autocast is on for the parameters' device type with the cache on, a
  sentinel (a 1x1 float32 leaf that requires grad) is cast under autocast: the cache keeps its copy;
- before the optimizer's next checked step, still under autocast: the sentinel is written in place and cast
  again.  Served the old value: the cache was never cleared, so one autocast region spans the earlier step
  and the forwards that made this step's gradients;
- only then, a few of the optimizer's float32 parameters with a gradient are cast by a matrix product
  (``matmul(p, v)``, the cache's path) and by hand from their current values: a cached copy that differs
  from the current weights was cast in that region before the weights changed, and every forward since has
  read it.  A parameter this guard has itself cast in the live region is never cast or judged there again
  (its own cast could be the stale one), and nothing is cast in a region not yet proven open across a step.

Silent when autocast is off at the step (a region around the forward and the loss only, the recommended
form), when the cache is off (``cache_enabled=False``), when the region was closed and opened again between
the steps (a region per iteration that also holds ``backward()`` and ``step()``), for closures, while a model
compiles, and for parameters that are not plain float32 tensors.
"""

from __future__ import annotations

import ast
import linecache
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.swapped import compiling
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

_PROBED = 4  # parameters cast per checked step
_MAX_NUMEL = 1 << 22  # a larger parameter is not probed (its product costs a forward's share)


def _autocast_on(device_type: str) -> torch.dtype | None:
    """The low-precision dtype of an autocast region open now for ``device_type`` with its cache on, or None."""
    try:
        if not torch.is_autocast_enabled(device_type) or not torch.is_autocast_cache_enabled():
            return None
        return torch.get_autocast_dtype(device_type)
    except (TypeError, RuntimeError, AttributeError):  # an older torch, or a device type autocast does not know
        return None


def _candidates(oi: OptInfo, device: torch.device) -> list[torch.Tensor]:
    out = []
    for p in oi.params:
        if (type(p) is torch.nn.Parameter or type(p) is torch.Tensor) and p.dtype == torch.float32 \
                and p.requires_grad and p.is_leaf and p.grad is not None and p.device == device \
                and p.dim() >= 1 and 0 < p.numel() <= _MAX_NUMEL:
            out.append(p)
    if len(out) > _PROBED:  # the first and the last layers, and two between
        n = len(out)
        out = [out[i] for i in sorted({0, n // 3, (2 * n) // 3, n - 1})]
    return out


def _with_lines(loc: str) -> list[int]:
    """The lines of the ``with`` statements of the user's file that enclose ``loc`` (innermost first)."""
    path, _, line = loc.rpartition(":")
    if not path or not line.isdigit():
        return []
    no = int(line)
    try:
        tree = ast.parse("".join(linecache.getlines(path)))
    except (SyntaxError, ValueError):
        return []
    out = [n for n in ast.walk(tree) if isinstance(n, (ast.With, ast.AsyncWith))
           and n.lineno < no <= (n.end_lineno or n.lineno)]
    return [n.lineno for n in sorted(out, key=lambda n: -n.lineno)]


def _region_line(loc: str | None) -> str | None:
    """``file:line`` of the ``with`` that most likely opens the autocast region around ``loc``: the innermost
    enclosing one that names autocast, else the outermost enclosing one."""
    if not loc:
        return None
    path = loc.rpartition(":")[0]
    lines = _with_lines(loc)
    if not lines:
        return None
    named = [n for n in lines if "autocast" in linecache.getline(path, n) or "amp" in linecache.getline(path, n)]
    return f"{path}:{(named or lines[-1:])[0]}"


class _Token:
    """A sentinel cast in the autocast region open after a checked step, and the parameters this guard cast
    in that region."""

    __slots__ = ("sentinel", "device_type", "dtype", "probed", "step_loc")

    def __init__(self, sentinel: torch.Tensor, device_type: str, dtype: torch.dtype, probed: set[int],
                 step_loc: str | None) -> None:
        self.sentinel = sentinel
        self.device_type = device_type
        self.dtype = dtype
        self.probed = probed
        self.step_loc = step_loc


class AutocastCacheChecks(Check):
    name = "castcache"

    def __init__(self, session: Any):
        super().__init__(session)
        self.tokens: dict[int, _Token] = {}  # id(optimizer) -> the sentinel of its last checked step
        self.region_probed: dict[int, set[int]] = {}  # id(optimizer) -> parameters cast in the region now open

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        key = id(oi.opt)
        token = self.tokens.pop(key, None)
        self.region_probed.pop(key, None)
        if closure or compiling() or self.s.reporter.has("autocast-stale-weights", oi.name):
            return
        if token is None or _autocast_on(token.device_type) != token.dtype:
            return
        s = token.sentinel
        with torch.no_grad():
            s.fill_(2.0)
        with torch.enable_grad():
            live = torch.mm(s, s).item() == 1.0  # served from the cache: the region never closed (4.0: cast anew)
        if not live:
            return  # a region per iteration: closed since the earlier step
        # the region is open since the earlier checked step: cast a few parameters this guard has not cast in it
        params = [p for p in _candidates(oi, s.device) if id(p) not in token.probed]
        self.region_probed[key] = set(token.probed) | {id(p) for p in params}
        if not params:
            return
        dtype = token.dtype
        with torch.enable_grad():  # a cast made here (a parameter not cached yet) keeps its gradient path
            v = [torch.linspace(1.0, 2.0, p.shape[-1], device=p.device) for p in params]
            cached = [torch.matmul(p, x).detach() for p, x in zip(params, v)]
        with torch.no_grad():
            fresh = [torch.matmul(p.detach().to(dtype), x.to(dtype)) for p, x in zip(params, v)]
            differ = torch.stack([(a != b).any() for a, b in zip(cached, fresh)]).float()
        step_loc = user_location(2)
        step = self.s.step

        def judge(values: list[float]) -> None:
            stale = [p for p, flag in zip(params, values) if flag]
            if stale:
                self._report(oi, stale, len(params), dtype, token, step_loc, step)

        self.s.defer(differ, judge)

    def after_checked_step(self, oi: OptInfo) -> None:
        key = id(oi.opt)
        self.tokens.pop(key, None)
        if compiling() or not oi.params or self.s.reporter.has("autocast-stale-weights", oi.name):
            return
        p0 = next((p for p in oi.params if p.dtype == torch.float32), None)
        if p0 is None:
            return
        dtype = _autocast_on(p0.device.type)
        if dtype is None:
            return
        s = torch.ones(1, 1, device=p0.device, requires_grad=True)
        with torch.enable_grad():
            _ = torch.mm(s, s)  # the cache keeps this cast until the outermost autocast region exits
        probed = self.region_probed.pop(key, set())
        self.tokens[key] = _Token(s, p0.device.type, dtype, probed, user_location(2))

    def _report(self, oi: OptInfo, stale: list[torch.Tensor], probed: int, dtype: torch.dtype, token: _Token,
                loc: str | None, step: int) -> None:
        names = ", ".join(self.s.name_of(p) for p in stale[:3])
        low = str(dtype).replace("torch.", "")
        at = loc or token.step_loc
        region = _region_line(at)
        where = (f"autocast region at {region}, " if region else "") + f"{oi.name}.step()" + (f" at {at}" if at else "")
        self.s.report(
            "autocast-stale-weights",
            f"{oi.name}.step()" + (f" at {at}" if at else "") + f" ran inside a torch.autocast region ({low}, "
            f"cast cache on) that stays open for the forwards after it" + (f" (opened at {region})" if region else "")
            + f": autocast keeps the {low} copy of each weight made the first time it is cast in the region and "
            f"serves it until the region exits, and the cached copy of {len(stale)} of {probed} sampled weights "
            f"({names}) no longer matches the weights the optimizer updated, so the forwards since the earlier "
            "step computed with the weights from before it. The parameters change and the model's outputs do "
            "not: the loss stays flat and the updates are never seen, with no error.",
            fix="open the autocast region around the forward and the loss only (with torch.autocast(...): "
            "loss = loss_fn(model(x), y)) and call backward() and optimizer.step() after it closes; a region that "
            "must span steps needs cache_enabled=False",
            where=where, key=oi.name, step=step,
        )
