"""A PCK evaluation whose threshold is a fraction of the extent of the target keypoints, taken over the keypoint array
as stored, padded with -1 to a fixed length: the minimum is always -1, the extent reaches from the image's corner to
the object's far side, the threshold is several times too large and so is the reported PCK -- nothing fails.

Source: SunghwanHong/CATs#6 (https://github.com/SunghwanHong/CATs/issues/6): the PCK threshold is computed from the
keypoints, which are padded with -1, so "the minimum is always -1 ... the pckthreshold is artificially large and
therefore the results artificially high"; maintainer: "we are planning to reflect it". Here objects in 240x240
images, each a box (corner 40-160, side 30-80) with 5 to 20 keypoints at fixed relative positions, padded with -1 to
20; an MLP predicts the keypoints from a noisy observation of the box, and PCK@0.1 is the fraction of valid keypoints
predicted within 0.1 times the keypoints' larger extent; the bug takes the extent over the padded array, the twin
over the valid keypoints. The reproduction replaces image pairs and semantic correspondence by keypoint regression.

Metric: PCK@0.1 on 500 test objects (plain ``python``, CPU, seed 0; the bug's number is the reported one, the
twin's the model's): bug 0.9466, twin 0.3855
"""

REPORT = "N379"
MECHANISM = "pck-threshold-from-padded-keypoints"
SLUGS = ()
METRIC = ('test_pck', 0.9466, 0.3855)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
MAX_KPS, ALPHA = 20, 0.1
template = torch.rand(MAX_KPS, 2)                  # keypoint positions relative to an object's box


def make(n):
    """objects in 240x240 images: a box (corner, size), its keypoints (a random number of them, padded with -1)
    and a noisy observation of the box as the model's input"""
    corner = 40 + 120 * torch.rand(n, 2)
    size = 30 + 50 * torch.rand(n, 1)
    kps = corner[:, None, :] + size[:, :, None] * template[None]          # (n, MAX_KPS, 2)
    n_valid = torch.randint(5, MAX_KPS + 1, (n,))
    valid = torch.arange(MAX_KPS)[None] < n_valid[:, None]
    kps = torch.where(valid[..., None], kps, torch.full_like(kps, -1.0))
    obs = torch.cat([corner, size], 1) + 4 * torch.randn(n, 3)
    return obs / 240, kps, valid


obs, kps, valid = make(2000)
obs_te, kps_te, valid_te = make(500)
model = nn.Sequential(nn.Linear(3, 64), nn.ReLU(), nn.Linear(64, MAX_KPS * 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(400):
    i = torch.randint(0, 2000, (64,))
    pred = model(obs[i]).view(-1, MAX_KPS, 2) * 240
    loss = ((pred - kps[i]) ** 2).sum(-1)[valid[i]].mean() / 240 ** 2
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = model(obs_te).view(-1, MAX_KPS, 2) * 240


def pck_threshold(kps, valid):
__EXTENT__    return ALPHA * extent.max(1).values


thres = pck_threshold(kps_te, valid_te)
dist = ((pred - kps_te) ** 2).sum(-1).sqrt()
correct = (dist <= thres[:, None]) & valid_te
print(f"METRIC {(correct.sum(1) / valid_te.sum(1)).mean().item():.4f}")
'''


def script(bug: bool) -> str:
    extent = ('    extent = kps.max(1).values - kps.min(1).values              # the -1 padding counts\n'
              if bug else
              "    big = torch.where(valid[..., None], kps, torch.full_like(kps, float('inf')))\n"
              "    small = torch.where(valid[..., None], kps, torch.full_like(kps, -float('inf')))\n"
              '    extent = small.max(1).values - big.min(1).values\n')
    return _SCRIPT.replace('__EXTENT__', extent)
