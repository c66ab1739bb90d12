"""A depth loss whose validity mask is taken on the normalised targets: after z-scoring, every pixel
nearer than the mean depth is negative, so ``target > 0`` drops half of the real pixels along with the
ones that have no reading, the network never sees near depths and predicts them too far -- with no
error and a loss that falls nicely.

Source: isl-org/MultiObjectiveOptimization#7 (https://github.com/isl-org/MultiObjectiveOptimization/issues/7),
"Depth loss": "There is a bug in the depth loss. All entries smaller than zero are masked. This causes
most of the entries to be excluded in the loss, as the depth map has been normalized. The correct way
would be to mask only the zero entries in the loss" (labels: bug; maintainer: "Thanks I will try to
make an update").  Here an MLP regresses per-pixel depth (in metres, 15% of pixels without a reading,
stored as 0) from synthetic features, with targets normalised by the valid pixels' mean and standard
deviation.  The buggy loss keeps ``normalised > 0``, the twin ``raw > 0``.

Metric: depth RMSE in metres on the valid validation pixels (plain ``python``, CPU, seed 0; lower is
better): bug 0.4716, twin 0.1584
"""

REPORT = "N158"
MECHANISM = "validity-mask-on-normalised-target"
SLUGS = ()
METRIC = ("val_depth_rmse", 0.4716, 0.1584)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def scenes(n):
    """Per-pixel features and depths in metres; 15% of the pixels have no depth reading (stored as 0)."""
    x = torch.randn(n, 6, generator=g)
    depth = 4.0 + 1.5 * torch.tanh(x[:, 0] + 0.5 * x[:, 1]) + 0.8 * x[:, 2].sin() + 0.1 * torch.randn(n, generator=g)
    depth[torch.rand(n, generator=g) < 0.15] = 0.0
    return x, depth


x_train, d_train = scenes(8000)
x_val, d_val = scenes(2000)
valid_train = d_train > 0
mean, std = d_train[valid_train].mean(), d_train[valid_train].std()
target = (d_train - mean) / std  # the network regresses normalised depth


def loss_mask(normalised, raw):
    return __MASK__


model = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(15):
    for i in range(0, 8000, 200):
        pred = model(x_train[i:i + 200]).squeeze(1)
        keep = loss_mask(target[i:i + 200], d_train[i:i + 200])
        loss = ((pred - target[i:i + 200])[keep] ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    pred = model(x_val).squeeze(1) * std + mean
valid = d_val > 0
print(f"METRIC {((pred - d_val)[valid] ** 2).mean().sqrt().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", "normalised > 0" if bug else "raw > 0")
