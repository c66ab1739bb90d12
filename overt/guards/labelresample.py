"""Guard on a class-index target made by interpolating a label map (slug ``label-map-interpolated``, issue 33).

An invariant of correct training: a target of class indices (what ``F.cross_entropy``/``F.nll_loss`` reads as
"pixel i is class c") is a labelling, and a labelling resampled with the image (a rotation, a scale, a resize)
stays one only by nearest-neighbour sampling.  A linear resampling (``F.grid_sample``'s default ``bilinear``,
``bicubic``; ``F.interpolate`` in ``linear``/``bilinear``/``bicubic``/``trilinear``/``area``) averages class ids
as if they were intensities: where class 0 meets class 2 the averages pass through 1, and once rounded back to
integers every such border carries a ring of class 1 that no source pixel has (kornia/kornia#1630).

Seen on values the program computes, whatever its code's form: on checked training steps the wrappers of
``F.grid_sample`` and ``F.interpolate`` keep each linear resampling of a tensor without gradient (its input,
output and call).  At a checked ``cross_entropy``/``nll_loss`` call whose integer target has as many elements as
a kept output (or as one sample of it), the device computes, for each such output: whether its input is a label
map (every value a non-negative integer), whether the resampling mixed values (some output is not an integer),
whether the target is that output rounded (or truncated, either clamped to the map's range), and how many target pixels carry a class that the
same resampling in ``nearest`` mode (the labelling's own resampling) gives to none of the pixel and its
neighbours: a class no nearby source pixel has.  Read at the next checked step; reported once per resampling
site when the first three hold and the foreign pixels of its looks add up to :data:`MIN_FOREIGN` or more.

Silent on nearest-mode resampling (not kept), on soft targets (a floating target is no class index), on binary
masks (rounding a bilinear 0/1 map is a threshold at one half: every pixel keeps a class one of its neighbours
has), on images and other continuous tensors (not integer-valued), and on resamplings the target does not equal.
"""

from __future__ import annotations

import functools
import inspect
import itertools
from typing import Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

LINEAR = {"grid_sample": ("bilinear", "bicubic"),
          "interpolate": ("linear", "bilinear", "bicubic", "trilinear", "area")}
MIN_FOREIGN = 8  # target pixels with a class none of their neighbours has in the nearest resampling
MIN_SHARE = 0.001  # ... and at least this share of the target's pixels
KEPT = 16  # resamplings kept per checked step
LOOKS = 8  # resamplings measured per pair of resampling and loss sites (an image's and a mask's may share a line)


@functools.lru_cache(maxsize=8)
def _signature(fn: Callable) -> inspect.Signature:
    return inspect.signature(fn)


class _Resampled:
    __slots__ = ("fn", "orig", "bound", "mode", "inp", "out", "loc")

    def __init__(self, fn: str, orig: Callable, bound: inspect.BoundArguments, mode: str, inp: torch.Tensor,
                 out: torch.Tensor, loc: str):
        self.fn, self.orig, self.bound, self.mode, self.inp, self.out, self.loc = fn, orig, bound, mode, inp, out, loc

    def nearest(self) -> torch.Tensor:
        """The same resampling of the same input in ``nearest`` mode (the labelling's own resampling)."""
        args = dict(self.bound.arguments)
        args["mode"] = "nearest"
        if self.fn == "interpolate":
            args["antialias"] = False
            if "align_corners" in args:
                args["align_corners"] = None
        return self.orig(**args)


def _neighbours_have(target: torch.Tensor, near: torch.Tensor, spatial: int) -> torch.Tensor:
    """Per pixel of ``target`` (``(N, *spatial)``): whether the pixel or one of its neighbours (a step of -1, 0
    or 1 along each spatial axis) has the same class in ``near``."""
    dims = tuple(range(near.dim() - spatial, near.dim()))
    have = torch.zeros_like(target, dtype=torch.bool)
    for shift in itertools.product((-1, 0, 1), repeat=spatial):
        have |= torch.roll(near, shift, dims) == target
    return have


class LabelResampleChecks(Check):
    name = "labelresample"

    def __init__(self, session: Any):
        super().__init__(session)
        self.kept: list[_Resampled] = []
        self.done: set[str] = set()
        self.tally: dict[str, tuple[float, float]] = {}  # foreign and all target pixels measured per site
        self.looks: dict[tuple[str, str], int] = {}  # resamplings measured per (call site, loss site)

    # -- the resampling wrappers --------------------------------------------------------------------------
    def on_resample(self, fn: str, orig: Callable, args: tuple, kwargs: dict, out: Any) -> None:
        """A call of ``F.<fn>`` on a checked step, with its result."""
        if len(self.kept) >= KEPT or not isinstance(out, torch.Tensor) or out.requires_grad:
            return  # a model's own upsampling (it carries the gradient) is no label map
        bound = _signature(orig).bind(*args, **kwargs)
        bound.apply_defaults()
        mode = bound.arguments.get("mode")
        inp = bound.arguments.get("input")
        if mode not in LINEAR[fn] or not isinstance(inp, torch.Tensor) or not inp.is_floating_point():
            return
        if inp.requires_grad or inp.dim() < 3 or out.numel() < 16:
            return
        loc = user_location(1) or f"F.{fn}"
        if loc in self.done:
            return
        self.kept.append(_Resampled(fn, orig, bound, mode, inp.detach(), out.detach(), loc))

    def after_checked_step(self, oi: Any) -> None:
        self.kept.clear()

    def remove_hooks(self) -> None:
        self.kept.clear()

    # -- the loss ---------------------------------------------------------------------------------------------
    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in ("cross_entropy", "nll_loss") or not self.kept:
            return
        if target.is_floating_point() or target.is_complex() or target.dtype == torch.bool or target.dim() < 2:
            return  # soft targets, or one class per sample (no map)
        if inp.dim() != target.dim() + 1:
            return
        loss_loc = user_location(1) or f"F.{name}"
        n = target.shape[0]
        per_sample = target[0].numel()
        for r in self.kept:
            pair = r.loc, loss_loc
            if r.loc in self.done or self.looks.get(pair, 0) >= LOOKS:
                continue
            spatial = r.out.dim() - 2
            if r.out.numel() == target.numel() and r.out.shape[0] == n:
                rows = None
            elif r.out.numel() == per_sample:  # one sample's map, resampled before batching
                rows = True
            else:
                continue
            if r.out.shape[1] != 1 or tuple(r.out.shape[2:]) != tuple(target.shape[-spatial:]):
                continue
            self.looks[pair] = self.looks.get(pair, 0) + 1
            self.s.defer(self._measure(r, target.detach(), rows is not None),
                         self._judge(r, name, loss_loc, tuple(target.shape)))

    def _measure(self, r: _Resampled, target: torch.Tensor, one_sample: bool) -> torch.Tensor:
        """On the device: ``[label_map, mixed, matched, foreign, pixels]`` (see the module's docstring)."""
        with torch.no_grad():
            spatial = r.out.dim() - 2
            inp = r.inp
            out = r.out[:, 0]
            label_map = ((inp == inp.round()).all() & (inp.amin() >= 0)).float()
            mixed = (out != out.round()).any().float()
            near = r.nearest()[:, 0]
            lo, hi = inp.amin(), inp.amax()  # a bicubic overshoot clamped back to the map's classes
            readings = [v.to(target.dtype) for v in (out.round(), out.trunc(), out.round().clamp(lo, hi),
                                                     out.trunc().clamp(lo, hi))]
            if one_sample:
                tgt = target.reshape((-1,) + tuple(out.shape[1:]))
                hit = torch.stack([(tgt == v).flatten(1).all(1) for v in readings], 1).any(1)
                matched = hit.any().float()
                idx = hit.float().argmax()
                tgt = tgt[idx:idx + 1]
            else:
                tgt = target.reshape(out.shape)
                matched = torch.stack([(tgt == v).all() for v in readings]).any().float()
            have = _neighbours_have(tgt, near.to(tgt.dtype), spatial)
            foreign = (~have).sum().float()
            return torch.stack([label_map, mixed, matched, foreign, torch.tensor(float(tgt.numel()),
                                                                                  device=foreign.device)])

    def _judge(self, r: _Resampled, loss: str, loss_loc: str, shape: tuple[int, ...]):
        def callback(vals: list[float]) -> None:
            label_map, mixed, matched, foreign, pixels = vals
            if r.loc in self.done or not (label_map and mixed and matched):
                return
            seen = self.tally.get(r.loc, (0.0, 0.0))
            foreign, pixels = seen[0] + foreign, seen[1] + pixels  # over the samples of one site's looks
            self.tally[r.loc] = foreign, pixels
            if foreign < max(MIN_FOREIGN, MIN_SHARE * pixels):
                return
            self.done.add(r.loc)
            self.s.report(
                "label-map-interpolated",
                f"the class-index target of F.{loss} at {loss_loc} (shape {list(shape)}) is a label map resampled "
                f"by F.{r.fn}(mode='{r.mode}') at {r.loc} and rounded back to integers: the resampling averaged "
                f"class ids as if they were intensities, and {int(foreign)} of {int(pixels)} target pixels carry a "
                f"class that neither the pixel nor any neighbour has when the same map is resampled in 'nearest' "
                "mode -- where two classes meet, the averages pass through the ids between them, so every border "
                "grows a ring of a class the image does not show there, and the model is trained to predict it.",
                fix=f"resample label maps with mode='nearest' (F.{r.fn}(mask, ..., mode='nearest'); "
                "InterpolationMode.NEAREST in torchvision, Resample.NEAREST in kornia), and keep the linear mode for "
                "the image only; or resample one-hot (soft) targets and keep them as probabilities.",
                where=f"F.{r.fn} call at {r.loc}", key=r.loc)

        return callback


def _wrapper(fn: str, active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        out = orig(*args, **kwargs)
        if torch.compiler.is_compiling() or not active or not is_armed():
            return out
        notify(fn, orig, args, kwargs, out, active)
        return out

    return wrapper


def notify(fn: str, orig: Callable, args: tuple, kwargs: dict, out: Any, active: list) -> None:
    """Hand a resampling call on a checked step to every armed session's check."""
    for s in active:
        check = getattr(s, "labelresample", None)
        if s.armed and check is not None:
            try:
                check.on_resample(fn, orig, args, kwargs, out)
            except Exception as exc:  # never break the user's call over a check
                s.check_failed(check, exc)


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``F.interpolate`` (``F.grid_sample`` is wrapped by :mod:`overt.guards.gridorder`, which hands its
    calls here too)."""
    import torch.nn.functional as F

    patch(F, "interpolate", functools.partial(_wrapper, "interpolate", active, is_armed))
