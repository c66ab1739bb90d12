"""Optical-flow targets resized to the training resolution with their per-axis scale factors swapped:
the horizontal component is scaled by the height ratio and the vertical one by the width ratio, so on
any non-square resize every target flow is wrong, with no error.

Source: sczhou/ProPainter#79 (https://github.com/sczhou/ProPainter/issues/79), "Some bugs in
resize_flow?": "As the flow should be [flow_x, flow_y], why the flow multiplies newh / oldh in dim 0,
and multiplies neww / oldw in dim 1?"; maintainer: "Hi @longyangqi , I have fixed this bug. Thank you
for pointing it out."  Here pairs of smooth random textures (16 x 32) are shifted by a known global
flow, both frames are resized to 16 x 16, and a small convolutional net is trained to predict the flow
map at that resolution from targets produced by ``resize_flow``.  The buggy ``resize_flow`` multiplies
``flow[:, 0]`` by ``newh / oldh`` and ``flow[:, 1]`` by ``neww / oldw``; the twin uses ``neww / oldw``
for x and ``newh / oldh`` for y.

Metric: mean end-point error of the predicted flow on 500 held-out pairs at the training resolution,
against the correctly resized flow (plain ``python``, CPU, seed 0): bug 1.1432, twin 0.5738 (lower is
better)
"""

REPORT = "N169"
MECHANISM = "flow-rescaled-with-swapped-axes"
SLUGS = ()
METRIC = ("val_epe", 1.1432, 0.5738)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
H, W, NH, NW = 16, 32, 16, 16


def pairs(n):
    """Smooth random textures and the same textures shifted by a global flow (u, v) in pixels."""
    tex = F.avg_pool2d(torch.randn(n, 1, H + 4, W + 4, generator=g), 3, 1)[:, :, :H, :W]
    u = torch.randint(-4, 5, (n,), generator=g)
    v = torch.randint(-2, 3, (n,), generator=g)
    moved = torch.stack([torch.roll(tex[i], (int(v[i]), int(u[i])), dims=(1, 2)) for i in range(n)])
    flow = torch.stack([u, v], 1).float()[:, :, None, None].expand(n, 2, H, W).clone()
    return tex, moved, flow


def resize_flow(flow, newh, neww):
    """Resize a (N, 2, H, W) flow map of [flow_x, flow_y] and rescale its vectors."""
    oldh, oldw = flow.shape[-2:]
    flow = F.interpolate(flow, (newh, neww), mode="bilinear", align_corners=False)
__SCALE__
    return flow


def prepare(n):
    a, b, flow = pairs(n)
    x = torch.cat([F.interpolate(a, (NH, NW), mode="bilinear", align_corners=False),
                   F.interpolate(b, (NH, NW), mode="bilinear", align_corners=False)], 1)
    return x, flow


x_train, flow_train = prepare(2000)
target_train = resize_flow(flow_train, NH, NW)
x_val, flow_val = prepare(500)
true_val = flow_val[:, :, 0, 0] * torch.tensor([NW / W, NH / H])

model = nn.Sequential(nn.Conv2d(2, 16, 5, padding=2), nn.ReLU(), nn.Conv2d(16, 16, 5, padding=2), nn.ReLU(),
                      nn.Conv2d(16, 2, 3, padding=1))
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(6):
    perm = torch.randperm(2000)
    for i in range(0, 2000, 50):
        idx = perm[i:i + 50]
        loss = F.l1_loss(model(x_train[idx]), target_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    pred = model(x_val).mean((2, 3))
print(f"METRIC {(pred - true_val).norm(dim=1).mean():.4f}")
'''

_BUG = """    flow[:, 0] *= newh / oldh
    flow[:, 1] *= neww / oldw"""
_TWIN = """    flow[:, 0] *= neww / oldw
    flow[:, 1] *= newh / oldh"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCALE__", _BUG if bug else _TWIN)
