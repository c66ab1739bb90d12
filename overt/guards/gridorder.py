"""Guard on a sampling grid whose coordinates are in (y, x) order (slug ``grid-coordinates-swapped``,
issue 33).

An invariant of warping with ``F.grid_sample``: its grid lists each output pixel's source as
``(x, y)`` (``(x, y, z)`` in 3-D) -- the width coordinate first -- and a warp that predicts a
displacement (a spatial transformer, image registration, optical-flow warping, deformable
sampling) adds it to an identity grid, so at rest the grid samples every pixel from itself.  An
identity grid built in array order, ``torch.stack(torch.meshgrid(ys, xs, indexing="ij"))`` listed
as ``(y, x)``, samples each pixel from its transposed position: with no displacement the moving
image is already transposed (flipped about its diagonal), the network has to undo a reflection no
small displacement can undo, and the warped images stay far from their targets, with no error
(voxelmorph/voxelmorph#652).

Seen with a wrapper of ``F.grid_sample`` on checked training steps: for a grid ``(N, H, W, 2)``
(or ``(N, D, H, W, 3)``) of at least :data:`MIN_SIDE` points a side, its mean over the batch is
compared, on the device, with the identity grid in both orders (each with ``align_corners`` true
and false): the mean absolute difference to the closest of each.  Read with the next checked step;
reported, once per call site, when on :data:`SEEN` checked calls the batch's mean grid lies within
:data:`NEAR` of the identity in reversed order and at least :data:`FAR` (and :data:`RATIO` times
as far) from the identity in the right one.  Silent for grids that are not near an identity in
either order (random affine warps, crops, a learned sampling pattern), evaluation, and tiny grids.

The same wrapper hands each checked call to :mod:`overt.guards.gridrange` (a grid in pixel units, a grid
normalised by the size instead of the size minus one).
"""

from __future__ import annotations

import functools
from typing import Any, Callable

import torch

from overt.guards import labelresample
from overt.guards.check import Check
from overt.guards.where import user_location

MIN_SIDE = 4
NEAR = 0.2  # mean distance to the reversed identity, in the grid's normalised units ([-1, 1])
FAR = 0.4  # mean distance to the right identity, and at least RATIO times the reversed one's
RATIO = 3.0
SEEN = 2  # checked calls of one site that agree


def _axis(n: int, align_corners: bool, device: torch.device) -> torch.Tensor:
    if align_corners:
        return torch.linspace(-1.0, 1.0, n, device=device)
    return (torch.arange(n, device=device, dtype=torch.float32) * 2 + 1) / n - 1


def _distances(mean: torch.Tensor) -> torch.Tensor:
    """``(right, reversed)``: the mean absolute difference between a grid ``(*spatial, k)`` and the identity
    grid listed width-first, and listed in array order, each at the closer ``align_corners`` convention."""
    spatial = mean.shape[:-1]
    right, rev = [], []
    for align in (True, False):
        axes = torch.meshgrid(*[_axis(n, align, mean.device) for n in spatial], indexing="ij")  # array order
        in_array_order = torch.stack(axes, -1)
        width_first = torch.stack(axes[::-1], -1)
        right.append((mean - width_first).abs().mean())
        rev.append((mean - in_array_order).abs().mean())
    return torch.stack((torch.stack(right).amin(), torch.stack(rev).amin()))


class GridOrderChecks(Check):
    name = "gridorder"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen: dict[str, int] = {}
        self.done: set[str] = set()

    def on_grid(self, grid: Any) -> None:
        """An ``F.grid_sample(input, grid, ...)`` call on a checked training step."""
        if not isinstance(grid, torch.Tensor) or not grid.is_floating_point() or grid.dim() not in (4, 5):
            return
        k = grid.shape[-1]
        spatial = grid.shape[1:-1]
        if k != grid.dim() - 2 or min(spatial) < MIN_SIDE:
            return
        loc = user_location(3) or "F.grid_sample"
        if loc in self.done:
            return
        mean = grid.detach().float().mean(0)
        self.s.defer(_distances(mean), self._judge(loc, tuple(grid.shape)))

    def _judge(self, loc: str, shape: tuple[int, ...]):
        def callback(vals: list[float]) -> None:
            right, reversed_ = vals
            if loc in self.done or not (reversed_ <= NEAR and right >= max(FAR, RATIO * reversed_)):
                return
            n = self.seen[loc] = self.seen.get(loc, 0) + 1
            if n < SEEN:
                return
            self.done.add(loc)
            coords = "(z, y, x)" if shape[-1] == 3 else "(y, x)"
            right_order = "(x, y, z)" if shape[-1] == 3 else "(x, y)"
            self.s.report(
                "grid-coordinates-swapped",
                f"the grid given to F.grid_sample at {loc} (shape {list(shape)}) is, averaged over the batch, the "
                f"identity grid with its coordinates listed as {coords} (mean distance {reversed_:.3f}, against "
                f"{right:.3f} from the identity in grid_sample's {right_order} order) on {n} checked steps: "
                "grid_sample reads the width coordinate first, so at rest every pixel is sampled from its "
                "transposed position and the warped image is flipped about its diagonal before any displacement "
                "is added; the network has to undo a reflection no small displacement can undo.",
                fix="list the identity grid's coordinates width first: ys, xs = torch.meshgrid(y, x, indexing='ij'); "
                "grid = torch.stack([xs, ys], -1) (or torch.meshgrid(x, y, indexing='xy')); a displacement field "
                "predicted as (dy, dx) channels must be flipped the same way (flow.flip(-1)).",
                where=f"F.grid_sample call at {loc}", key=loc)

        return callback


def _wrapper(active: list, is_armed: Callable[[], bool], orig: Callable) -> Callable:
    @functools.wraps(orig)
    def grid_sample(input: Any, grid: Any, *args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling() or not active or not is_armed():
            return orig(input, grid, *args, **kwargs)
        if torch.is_grad_enabled():
            for s in active:
                if s.armed:
                    try:
                        s.gridorder.on_grid(grid)
                    except Exception as exc:  # never break the user's call over a check
                        s.check_failed(s.gridorder, exc)
                    try:
                        s.gridrange.on_call(input, grid, args, kwargs)  # grid-in-pixel-units, grid-normalised-by-size
                    except Exception as exc:
                        s.check_failed(s.gridrange, exc)
        out = orig(input, grid, *args, **kwargs)
        labelresample.notify("grid_sample", orig, (input, grid) + args, kwargs, out, active)  # label-map-interpolated
        return out

    return grid_sample


def install(patch: Callable, active: list, is_armed: Callable[[], bool]) -> None:
    """Wrap ``F.grid_sample`` with ``patch(owner, name, make)`` (a name imported before the session
    started keeps the original)."""
    import torch.nn.functional as F

    patch(F, "grid_sample", functools.partial(_wrapper, active, is_armed))
