"""grid-coordinates-swapped (issue 33; tests/wild w179): an identity grid for F.grid_sample listed in
array order, in forms other than the wild case's spatial-transformer buffer -- a functional optical-flow
warp built each call with meshgrid(..., indexing="ij"), a 3-D volume warp listed (z, y, x) -- each beside
its twin listed width first, and grids that are not an identity at rest (an affine_grid spatial
transformer, random affine augmentation) silent.  Real small runs on the digits."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _images(size: int = 16) -> torch.Tensor:
    x = digits()[0][:400].reshape(-1, 1, 8, 8)
    return F.interpolate(x, size=(size, size), mode="bilinear", align_corners=False)


def _warp(moving: torch.Tensor, flow: torch.Tensor, swapped: bool) -> torch.Tensor:
    """Warp ``moving`` (N, C, H, W) by ``flow`` (N, 2, H, W), in normalised units."""
    h, w = moving.shape[-2:]
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    identity = torch.stack([ys, xs] if swapped else [xs, ys], -1)
    return F.grid_sample(moving, identity + flow.permute(0, 2, 3, 1), align_corners=True)


def _register(swapped: bool, steps: int = 6) -> tuple[list, str]:
    """Each scan registered to a copy of itself shifted by one pixel: a CNN predicts the flow."""
    torch.manual_seed(0)
    fixed = _images()
    moving = fixed.roll(1, dims=-1)
    net = nn.Sequential(nn.Conv2d(2, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 3, padding=1))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    g = guarded(net, opt, ignore=TIMING)
    for i in range(steps):
        m, f = moving[50 * i:50 * (i + 1)], fixed[50 * i:50 * (i + 1)]
        loss = F.mse_loss(_warp(m, 0.1 * net(torch.cat([m, f], 1)), swapped), f)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_a_flow_warp_with_an_ij_grid_is_named_at_its_call():
    findings, text = _register(swapped=True)
    assert slugs(findings) == ["grid-coordinates-swapped"], text
    assert "F.grid_sample call at tests/guards/test_gridorder.py:" in text and "(y, x)" in text, text


class _VolumeWarp(nn.Module):
    """A 3-D registration head: a displacement per voxel of a (N, 1, D, H, W) volume."""

    def __init__(self, order: str):
        super().__init__()
        self.flow = nn.Conv3d(2, 3, 3, padding=1)
        self.order = order

    def forward(self, moving, fixed):
        d, h, w = moving.shape[-3:]
        zs, ys, xs = torch.meshgrid(torch.linspace(-1, 1, d), torch.linspace(-1, 1, h), torch.linspace(-1, 1, w),
                                    indexing="ij")
        identity = torch.stack([zs, ys, xs] if self.order == "zyx" else [xs, ys, zs], -1)
        flow = 0.05 * self.flow(torch.cat([moving, fixed], 1)).permute(0, 2, 3, 4, 1)
        return F.grid_sample(moving, identity + flow, align_corners=True)


@pytest.mark.parametrize("order", ["zyx", "xyz"], ids=["zyx", "twin"])
def test_a_volume_grid_in_array_order_is_named(order):
    torch.manual_seed(0)
    vol = _images(8)[:320].reshape(40, 1, 8, 8, 8)  # eight scans stacked into an 8x8x8 volume
    model = _VolumeWarp(order)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(5):
        f = vol[8 * i:8 * (i + 1)]
        loss = F.mse_loss(model(f.roll(1, dims=-1), f), f)
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings, text = g.report(), g.session.options.stream.getvalue()
    if order == "zyx":
        assert slugs(findings) == ["grid-coordinates-swapped"], text
        assert "(z, y, x)" in text, text
    else:
        assert "grid-coordinates-swapped" not in slugs(findings), text


class _AffineSTN(nn.Module):
    """A spatial transformer: affine_grid (right order by construction) from a predicted theta."""

    def __init__(self, random: bool):
        super().__init__()
        self.loc = nn.Sequential(nn.Flatten(), nn.Linear(256, 6))
        nn.init.zeros_(self.loc[1].weight)
        with torch.no_grad():
            self.loc[1].bias.copy_(torch.tensor([1.0, 0, 0, 0, 1.0, 0]))
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(256, 10))
        self.random = random

    def forward(self, x):
        theta = self.loc(x).view(-1, 2, 3)
        if self.random:  # random rotations by up to 180 degrees: no identity at rest
            a = (torch.rand(len(x)) * 2 - 1) * torch.pi
            theta = torch.stack([torch.stack([a.cos(), -a.sin(), 0 * a], 1),
                                 torch.stack([a.sin(), a.cos(), 0 * a], 1)], 1)
        grid = F.affine_grid(theta, list(x.shape), align_corners=False)
        return self.head(F.grid_sample(x, grid, align_corners=False))


@pytest.mark.parametrize("random", [False, True], ids=["affine-stn", "random-rotations"])
def test_grids_that_are_right_or_no_identity_are_silent(random):
    torch.manual_seed(0)
    x, y = _images(), digits()[1][:400]
    model = _AffineSTN(random)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(6):
        loss = F.cross_entropy(model(x[50 * i:50 * (i + 1)]), y[50 * i:50 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert "grid-coordinates-swapped" not in slugs(g.report()), g.session.options.stream.getvalue()


def test_the_twin_flow_warp_is_silent():
    findings, text = _register(swapped=False)
    assert "grid-coordinates-swapped" not in slugs(findings), text


class _Registration(nn.Module):
    """moving and fixed scans stacked as two channels in, the moving scan warped onto the fixed one out."""

    def __init__(self, swapped: bool):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(2, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 2, 3, padding=1))
        self.swapped = swapped

    def forward(self, pair):
        return _warp(pair[:, :1], 0.1 * self.net(pair), self.swapped)


@pytest.mark.parametrize("swapped", [True, False], ids=["ij-grid", "twin"])
def test_the_engine_names_a_swapped_grid_inside_the_model(swapped, tmp_path, capsys):
    from torch.utils.data import TensorDataset

    from overt import Trainer

    torch.manual_seed(0)
    fixed = _images()
    pairs = torch.cat([fixed.roll(1, dims=-1), fixed], 1)
    model = _Registration(swapped)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), nn.MSELoss(), TensorDataset(pairs, fixed),
                      run_dir=tmp_path / "run", epochs=1, batch_size=50, progress="off", tensorboard=False,
                      checkpoint=False, guards=True)
    summary = trainer.fit()
    err = capsys.readouterr().err
    if swapped:
        assert "grid-coordinates-swapped" in str(summary) and "F.grid_sample call at" in err, err
    else:
        assert "grid-coordinates-swapped" not in str(summary) + err, err
