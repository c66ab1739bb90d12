"""Masked-reconstruction pretraining whose loss is taken on the visible patches (``~mask`` where ``mask`` marks the
masked ones), so the network learns to copy its input and never to fill in what it cannot see -- nothing fails and
the training loss goes down.

Source: Sllambias/asparagus#12 (https://github.com/Sllambias/asparagus/pull/12), a masked-only reconstruction loss
for 3D pretraining that indexes with ``~mask``, the visible voxels, so the objective "inverted the intended masked
reconstruction objective"; maintainer: "This is indeed an issue" (merged). Here an MLP reconstructs 8x8 digits from
the image with half of its 2x2 patches zeroed (and the patch mask as a second input); the bug takes the mean squared
error on the visible pixels, the twin on the masked ones. The reproduction replaces 3D volumes and a U-Net by 64-pixel
digits and an MLP.

Metric: mean squared error on the masked pixels of 397 held-out digits, under a fresh mask (plain ``python``, CPU,
seed 0; lower is better): bug 0.0974, twin 0.0461
"""

REPORT = "N371"
MECHANISM = "reconstruction-loss-on-visible-patches"
SLUGS = ()
METRIC = ('test_masked_mse', 0.0974, 0.0461)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, _ = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
perm = torch.randperm(len(X))
tr, te = X[perm[:1400]], X[perm[1400:]]


def patch_mask(n):
    masked = torch.rand(n, 4, 4) < 0.5      # True: the 2x2 patch is masked out
    return masked.repeat_interleave(2, 1).repeat_interleave(2, 2).reshape(n, 64)


model = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 64))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    x = tr[torch.randint(0, len(tr), (64,))]
    mask = patch_mask(len(x))
    pred = model(torch.cat([x * ~mask, mask.float()], 1))
__LOSS__    opt.zero_grad()
    loss.backward()
    opt.step()
torch.manual_seed(1)
mask = patch_mask(len(te))
with torch.no_grad():
    pred = model(torch.cat([te * ~mask, mask.float()], 1))
print(f"METRIC {F.mse_loss(pred[mask], te[mask]).item():.4f}")
'''


def script(bug: bool) -> str:
    loss = ('    loss = F.mse_loss(pred[~mask], x[~mask])\n' if bug
            else '    loss = F.mse_loss(pred[mask], x[mask])\n')
    return _SCRIPT.replace('__LOSS__', loss)
