"""A spatial transformer whose identity grid lists its coordinates as (y, x) while ``grid_sample``
reads (x, y): a zero displacement already transposes the moving image, the network has to undo a
transposition no small displacement can undo, and the registered scans stay far from their targets --
with no error.

Source: voxelmorph/voxelmorph#652 (https://github.com/voxelmorph/voxelmorph/pull/652), "[fix] ensure
identity grid matches PyTorch grid_sample axis convention": "Previously, the identity grid was
constructed in **[Y, X] (2D)** or **[Z, Y, X] (3D)** order, which does not match the **[X, Y, (Z)]**
convention required by ``grid_sample``. This mismatch could cause flipped or transposed outputs when
warping images" (merged; maintainer: "Thank you Jingru!").  Here a CNN predicts a dense displacement
field that registers each digit scan (16x16) to a copy of itself shifted by up to two pixels, trained
on the warped image's MSE.  The buggy ``identity_grid`` returns ``torch.stack([ys, xs], -1)``, the twin
``torch.stack([xs, ys], -1)``.

Metric: validation MSE between the warped moving scans and the fixed scans (plain ``python``, CPU,
seed 0; lower is better): bug 0.0332, twin 0.0041
"""

REPORT = "N153"
MECHANISM = "grid-coordinates-in-yx-order"
SLUGS = ()
METRIC = ("val_registration_mse", 0.0332, 0.0041)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
d = load_digits()
S = 16
images = F.interpolate(torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0, size=(S, S),
                       mode="bilinear", align_corners=False)


def pairs(imgs):
    """(moving, fixed): each fixed scan and the same scan shifted by up to two pixels."""
    shifts = torch.randint(-2, 3, (len(imgs), 2), generator=g)
    moving = torch.stack([im.roll((int(dy), int(dx)), dims=(1, 2)) for im, (dy, dx) in zip(imgs, shifts)])
    return moving, imgs


def identity_grid(h, w):
    ys, xs = torch.meshgrid(torch.linspace(-1, 1, h), torch.linspace(-1, 1, w), indexing="ij")
    return __GRID__  # (h, w, 2), read by grid_sample


class SpatialTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("grid", identity_grid(S, S))

    def forward(self, moving, flow):  # flow: (N, 2, H, W) in normalised units
        return F.grid_sample(moving, self.grid + flow.permute(0, 2, 3, 1), align_corners=True)


net = nn.Sequential(nn.Conv2d(2, 32, 5, padding=2), nn.ReLU(), nn.Conv2d(32, 32, 5, padding=2), nn.ReLU(),
                    nn.Conv2d(32, 2, 5, padding=2))
warp = SpatialTransformer()
mov_train, fix_train = pairs(images[:1400])
mov_val, fix_val = pairs(images[1400:])
opt = torch.optim.Adam(net.parameters(), lr=1e-3)
#@guard
for epoch in range(6):
    for i in range(0, 1400, 50):
        m, f = mov_train[i:i + 50], fix_train[i:i + 50]
        loss = F.mse_loss(warp(m, net(torch.cat([m, f], 1))), f)
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    mse = F.mse_loss(warp(mov_val, net(torch.cat([mov_val, fix_val], 1))), fix_val).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__GRID__", "torch.stack([ys, xs], -1)" if bug else "torch.stack([xs, ys], -1)")
