"""grid-in-pixel-units and grid-normalised-by-size (issue 33; tests/wild w439, w440): a glimpse network that reads
a 5x5 patch of each 16x16 digit at a random pixel offset per image through F.grid_sample, its patch grid in pixel
units, or normalised by W instead of W - 1 under align_corners=True, each beside its twin normalised right; and
correct grids that must stay silent: an affine_grid spatial transformer, random affine warps, a centred zoom on the
same lattice, a resize grid reaching both ends, a flow warp, projected points of which most fall off the image.
Real small runs on the digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs

SLUGS = ("grid-in-pixel-units", "grid-normalised-by-size")
SIZE = 16
PATCH = 5


def _data() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = digits()
    x = F.interpolate(x[:480].reshape(-1, 1, 8, 8), size=(SIZE, SIZE), mode="bilinear", align_corners=False)
    return x, y[:480]


def _patch_grid(n: int, norm: str) -> torch.Tensor:
    """A (n, PATCH, PATCH, 2) grid (x, y) reading a patch at a random integer pixel offset per image."""
    off = torch.randint(0, SIZE - PATCH + 1, (n, 2)).float()
    r = torch.arange(PATCH, dtype=torch.float32)
    ys, xs = torch.meshgrid(r, r, indexing="ij")
    pix = torch.stack([xs, ys], -1)[None] + off[:, None, None, :]  # pixel indices
    if norm == "pixels":
        return pix
    if norm == "size":
        return pix / SIZE * 2 - 1
    return pix / (SIZE - 1) * 2 - 1


class _Glimpse(nn.Module):
    def __init__(self, norm: str):
        super().__init__()
        self.norm = norm
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(PATCH * PATCH, 64), nn.ReLU(), nn.Linear(64, 10))

    def forward(self, x):
        grid = _patch_grid(len(x), self.norm)
        return self.head(F.grid_sample(x, grid, mode="bilinear", padding_mode="zeros", align_corners=True))


def _train(model: nn.Module, steps: int = 6) -> tuple[list, str]:
    torch.manual_seed(0)
    x, y = _data()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(steps):
        loss = F.cross_entropy(model(x[64 * i:64 * (i + 1)]), y[64 * i:64 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("norm,slug", [("pixels", "grid-in-pixel-units"), ("size", "grid-normalised-by-size")],
                         ids=["pixel-units", "by-size"])
def test_a_patch_grid_off_the_normalised_units_is_named(norm, slug):
    torch.manual_seed(0)
    findings, text = _train(_Glimpse(norm))
    assert [s for s in slugs(findings) if s in SLUGS] == [slug], text
    assert "F.grid_sample call at tests/guards/test_gridrange.py:" in text, text


def test_the_twin_patch_grid_is_silent():
    torch.manual_seed(0)
    findings, text = _train(_Glimpse("right"))
    assert not set(slugs(findings)) & set(SLUGS), text


class _Sampler(nn.Module):
    """A classifier on F.grid_sample(x, grid) for a grid made by ``kind`` (each a correct program)."""

    def __init__(self, kind: str):
        super().__init__()
        self.kind = kind
        self.loc = nn.Linear(SIZE * SIZE, 6)
        nn.init.zeros_(self.loc.weight)
        with torch.no_grad():
            self.loc.bias.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0]))
        self.head = nn.Sequential(nn.Flatten(), nn.LazyLinear(10))

    def forward(self, x):
        n = len(x)
        align = True
        if self.kind == "stn":  # a spatial transformer at its identity start
            theta, align = self.loc(x.flatten(1)).view(-1, 2, 3), False
            grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        elif self.kind == "random-affine":  # random zooms by up to 1.4 and shifts
            s = 0.7 + 0.7 * torch.rand(n)
            t = (torch.rand(n, 2) - 0.5) * 0.6
            theta = torch.zeros(n, 2, 3)
            theta[:, 0, 0], theta[:, 1, 1], theta[:, :, 2] = s, s, t
            grid = F.affine_grid(theta, [n, 1, 8, 8], align_corners=True)
        elif self.kind == "centred-zoom":  # scale 1 - 2/W: on the -1 + 2k/W lattice, and centred
            theta = torch.tensor([[1 - 2 / SIZE, 0, 0], [0, 1 - 2 / SIZE, 0]]).expand(n, 2, 3)
            grid = F.affine_grid(theta, [n, 1, SIZE - 1, SIZE - 1], align_corners=True)
        elif self.kind == "resize":  # SIZE + 1 points from -1 to +1: on the W-lattice, reaching both ends
            r = torch.linspace(-1, 1, SIZE + 1)
            ys, xs = torch.meshgrid(r, r, indexing="ij")
            grid = torch.stack([xs, ys], -1).expand(n, -1, -1, -1)
        elif self.kind == "flow":  # identity plus a displacement predicted from the image
            r = torch.linspace(-1, 1, SIZE)
            ys, xs = torch.meshgrid(r, r, indexing="ij")
            flow = 0.1 * torch.tanh(self.loc(x.flatten(1))[:, :2])
            grid = torch.stack([xs, ys], -1)[None] + flow[:, None, None, :]
        elif self.kind == "paste":  # each image pasted into the top-left box of a 4x larger canvas
            r = torch.linspace(-1, 7, 4 * SIZE)  # canvas pixels in the box's normalised units
            ys, xs = torch.meshgrid(r, r, indexing="ij")
            grid = torch.stack([xs, ys], -1).expand(n, -1, -1, -1)
            align = False
        else:  # "projected": points of a scene projected to the image, most of them outside the view
            pts = torch.randn(n, 8, 8, 2) * 3.0
            grid = pts
        return self.head(F.grid_sample(x, grid, padding_mode="zeros", align_corners=align))


@pytest.mark.parametrize("kind", ["stn", "random-affine", "centred-zoom", "resize", "flow", "projected", "paste"])
def test_correct_grids_are_silent(kind):
    torch.manual_seed(0)
    findings, text = _train(_Sampler(kind))
    assert not set(slugs(findings)) & set(SLUGS), text

