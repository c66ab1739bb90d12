"""Guard on a ``F.grid_sample`` grid that is not in the normalised units the call reads (slugs
``grid-in-pixel-units`` and ``grid-normalised-by-size``, issue 33).

Two invariants of sampling an image with ``F.grid_sample``, whose grid gives each point's source in
normalised units, -1 and +1 being the image's two ends along each axis:

- **the grid reads the image it is given** (``grid-in-pixel-units``): a grid whose points are pixel
  indices (0 .. W-1) instead of normalised coordinates puts almost every point past +1, where the
  call reads only the zero padding (cvg/nice-slam#26).  Premise: with ``padding_mode='zeros'``, at
  least :data:`MOSTLY` of the batch's points read no pixel at all (every bilinear tap off the image
  along some axis), and at least :data:`INSIDE_AS_PIXELS` of them lie inside the image when read as
  pixel indices ([-0.5, size - 0.5] on every axis), and the grid has at most :data:`PASTE` times as
  many points as the image has pixels.  A projection of 3-D points of which most fall outside the
  view spreads them far past the image in pixel units too, and a paste of a small image into a larger
  canvas (a mask into its box: grid much larger than the image) reads padding by intent: both silent.
- **with align_corners=True the grid's lattice is the pixel centres'** (``grid-normalised-by-size``):
  the centres are at -1 + 2k/(W-1); a pixel index normalised by W (``x / W * 2 - 1``) lands on the
  lattice -1 + 2k/W, between the centres, and never reaches the last pixel, so the sampled region
  shrinks towards the first corner (zju3dv/neuralbody#134).  Premise, along one axis of size at least
  :data:`MIN_SIZE`: every point lies on the W-lattice, at least :data:`OFF` of them off the
  (W-1)-lattice, the largest is below 1 - 1/W, and the values are not centred on 0 (a centred zoom,
  ``affine_grid`` with a scale of 1 - 2/W, sits on the same lattice and is a correct crop).  A
  continuous grid (a flow field, a random affine warp, projected points) is on no lattice and stays
  silent.

Seen with the wrapper of ``F.grid_sample`` that :mod:`overt.guards.gridorder` installs, on checked
training calls only: the statistics are computed on the device and read with the next checked
step; reported, once per call site, when :data:`SEEN` checked calls agree.
"""

from __future__ import annotations

from typing import Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

MIN_SIDE = 4  # grid points a side (below: silent)
MIN_SIZE = 4  # image pixels along the axis of the lattice test
MOSTLY = 0.5  # fraction of points that read only padding
INSIDE_AS_PIXELS = 0.9  # fraction of points inside the image when read as pixel indices
OFF = 0.5  # fraction of points off the (W-1)-lattice
TOL = 1e-3  # distance to a lattice point, in lattice steps
SEEN = 2  # checked calls of one site that agree
PASTE = 4  # grid points per image over the image's pixels above which a call pastes rather than samples


def _options(args: tuple, kwargs: dict) -> tuple[str, str, bool]:
    """``(mode, padding_mode, align_corners)`` of a ``grid_sample(input, grid, *args, **kwargs)`` call."""
    names = ("mode", "padding_mode", "align_corners")
    given = dict(zip(names, args))
    given.update({k: v for k, v in kwargs.items() if k in names})
    return str(given.get("mode", "bilinear")), str(given.get("padding_mode", "zeros")), bool(given.get("align_corners"))


def _on_lattice(values: torch.Tensor, step_count: int) -> torch.Tensor:
    """Whether each value in [-1, 1] units lies on the lattice -1 + 2k/step_count."""
    pos = (values + 1) * (step_count / 2)
    return (pos - pos.round()).abs() < TOL


def _stats(grid: torch.Tensor, sizes: list[int], align: bool) -> torch.Tensor:
    """A flat tensor: fraction of points reading only padding, fraction inside the image as pixel indices,
    then per axis (grid coordinate order, x first): fraction on the size-lattice, fraction on the
    (size-1)-lattice, min, max."""
    g = grid.detach().float().reshape(-1, grid.shape[-1])
    outside = torch.zeros(g.shape[0], dtype=torch.bool, device=g.device)
    as_pixels = torch.ones_like(outside)
    per_axis = []
    for a, n in enumerate(sizes):
        v = g[:, a]
        p = (v + 1) / 2 * (n - 1) if align else ((v + 1) * n - 1) / 2  # source position in pixels
        outside |= (p <= -1) | (p >= n)
        as_pixels &= (v >= -0.5) & (v <= n - 0.5)
        per_axis += [_on_lattice(v, n).float().mean(), _on_lattice(v, max(n - 1, 1)).float().mean(), v.amin(),
                     v.amax()]
    return torch.stack([outside.float().mean(), as_pixels.float().mean()] + per_axis)


class GridRangeChecks(Check):
    name = "gridrange"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen: dict[tuple[str, str], int] = {}
        self.done: set[tuple[str, str]] = set()

    def on_call(self, input: Any, grid: Any, args: tuple, kwargs: dict) -> None:
        """An ``F.grid_sample(input, grid, *args, **kwargs)`` call on a checked training step."""
        if not (isinstance(grid, torch.Tensor) and isinstance(input, torch.Tensor)) or not grid.is_floating_point():
            return
        if grid.dim() not in (4, 5) or input.dim() != grid.dim() or grid.shape[-1] != grid.dim() - 2:
            return
        if min(grid.shape[1:-1]) < MIN_SIDE or grid.device.type == "meta":
            return
        mode, padding, align = _options(args, kwargs)
        loc = user_location(3) or "F.grid_sample"
        if (loc, "grid-in-pixel-units") in self.done and (loc, "grid-normalised-by-size") in self.done:
            return
        sizes = list(input.shape[2:])[::-1]  # (W, H) or (W, H, D): the grid's coordinate order
        # a grid of many more points than the image has pixels pastes the image into a larger canvas (a mask
        # pasted into its box), where reading padding around it is the intent: the pixel-unit premise is silent
        sampling = grid[0, ..., 0].numel() <= PASTE * input[0, 0].numel()
        self.s.defer(_stats(grid, sizes, align),
                     self._judge(loc, tuple(grid.shape), sizes, padding if sampling else "pasting", align))

    def _count(self, key: tuple[str, str]) -> bool:
        if key in self.done:
            return False
        n = self.seen[key] = self.seen.get(key, 0) + 1
        if n < SEEN:
            return False
        self.done.add(key)
        return True

    def _judge(self, loc: str, shape: tuple[int, ...], sizes: list[int], padding: str, align: bool):
        def callback(vals: list[float]) -> None:
            padded, as_pixels = vals[0], vals[1]
            axes = [vals[2 + 4 * a: 6 + 4 * a] for a in range(len(sizes))]
            if padding == "zeros" and padded >= MOSTLY and as_pixels >= INSIDE_AS_PIXELS:
                if self._count((loc, "grid-in-pixel-units")):
                    self._report_pixels(loc, shape, sizes, padded, axes)
            if not align:
                return
            for a, (on_n, on_n1, lo, hi) in enumerate(axes):
                n = sizes[a]
                if (n >= MIN_SIZE and on_n >= 1 - 1e-6 and 1 - on_n1 >= OFF and hi < 1 - 1 / n
                        and abs(lo + hi) > 1 / n and hi - lo >= 4 / n):
                    if self._count((loc, "grid-normalised-by-size")):
                        self._report_lattice(loc, shape, "xyz"[a], n, lo, hi)
                    return

        return callback

    def _report_pixels(self, loc: str, shape: tuple[int, ...], sizes: list[int], padded: float,
                       axes: list[list[float]]) -> None:
        ranges = ", ".join(f"{'xyz'[a]} in [{lo:.3g}, {hi:.3g}] for {n} pixels"
                           for a, ((_, _, lo, hi), n) in enumerate(zip(axes, sizes)))
        self.s.report(
            "grid-in-pixel-units",
            f"the grid given to F.grid_sample at {loc} (shape {list(shape)}; {ranges}) puts {padded:.0%} of its "
            "points where no pixel is read, past the image's ends at -1 and +1, while read as pixel indices it "
            "lies inside the image: grid_sample takes coordinates normalised to [-1, 1], so a grid in pixel units "
            "samples the zero padding and the sampled features are mostly zeros, with no error.",
            fix="normalise pixel coordinates before sampling: x / (W - 1) * 2 - 1 with align_corners=True, or "
            "(2 * x + 1) / W - 1 with align_corners=False (the same for y with H, z with D).",
            where=f"F.grid_sample call at {loc}", key=loc)

    def _report_lattice(self, loc: str, shape: tuple[int, ...], axis: str, n: int, lo: float, hi: float) -> None:
        self.s.report(
            "grid-normalised-by-size",
            f"the grid given to F.grid_sample(..., align_corners=True) at {loc} (shape {list(shape)}) has every "
            f"{axis} coordinate on the lattice -1 + 2k/{n} (the image's size along {axis}), not on the pixel "
            f"centres -1 + 2k/{n - 1}, and spans [{lo:.3g}, {hi:.3g}], short of the last pixel at +1: with "
            "align_corners=True the centres of the first and last pixels are -1 and +1, so a pixel index divided "
            "by the size instead of the size minus one lands between pixels and the sampled region shrinks towards "
            "the first corner, with no error.",
            fix="normalise a pixel index x with x / (W - 1) * 2 - 1 when align_corners=True (or normalise it with "
            "(2 * x + 1) / W - 1 and pass align_corners=False).",
            where=f"F.grid_sample call at {loc}", key=loc)
