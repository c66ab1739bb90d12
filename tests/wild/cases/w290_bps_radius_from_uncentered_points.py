"""A point-cloud normalisation that centres the points but takes the radius it divides by from the uncentered points:
a cloud far from the origin is shrunk by its distance from the origin instead of scaled to the unit ball, so the
basis-point encoding of the same shape changes with where the shape lies -- with no error.

Source: sergeyprokudin/bps#4 (https://github.com/sergeyprokudin/bps/issues/4), ``normalize`` computes ``x_norm = x
- x_mean`` and then the maximum radius from ``x`` rather than ``x_norm``; maintainer: "Indeed, this is a bug".
Here clouds of 200 points sampled from four shapes (sphere, cube surface, flat disc, thin cylinder) of random size
are encoded by their distances to 64 fixed basis points in the unit ball (the BPS encoding) and classified by an
MLP; the training clouds lie near the origin, the test clouds are the same shapes moved up to 3 units away, which
the normalisation is there to make harmless. The buggy normalisation takes the radius of ``x``, the twin of ``x -
mean``.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.6860, twin 1.0000
"""

REPORT = "N264"
MECHANISM = "normalisation-radius-from-uncentered-points"
SLUGS = ()
METRIC = ("test_accuracy", 0.6860, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
P, B, K = 200, 64, 4
basis = F.normalize(torch.randn(B, 3), dim=1) * torch.rand(B, 1) ** (1 / 3)


def shape(k):
    u = torch.randn(P, 3)
    if k == 0:
        pts = F.normalize(u, dim=1)
    elif k == 1:
        pts = torch.rand(P, 3) * 2 - 1
        axis = torch.randint(0, 3, (P,))
        pts[torch.arange(P), axis] = torch.sign(torch.randn(P))
    elif k == 2:
        pts = torch.cat([F.normalize(u[:, :2], dim=1) * torch.rand(P, 1).sqrt(), 0.05 * u[:, 2:]], 1)
    else:
        pts = torch.cat([F.normalize(u[:, :2], dim=1) * 0.2, torch.rand(P, 1) * 2 - 1], 1)
    return pts * (0.5 + torch.rand(()))


def clouds(n, shift):
    y = torch.randint(0, K, (n,))
    x = torch.stack([shape(int(k)) for k in y])
    direction = F.normalize(torch.randn(n, 1, 3), dim=2)
    return x + direction * shift * torch.rand(n, 1, 1), y


def normalize(x):
    x_mean = x.mean(1, keepdim=True)
    x_norm = x - x_mean
    radius = __RADIUS__.norm(dim=2).max(1).values
    return x_norm / radius[:, None, None]


def encode(x):
    return torch.cdist(basis.expand(len(x), B, 3), normalize(x)).min(2).values


x_tr, y_tr = clouds(1500, 0.3)
x_te, y_te = clouds(500, 3.0)
f_tr, f_te = encode(x_tr), encode(x_te)
model = nn.Sequential(nn.Linear(B, 64), nn.ReLU(), nn.Linear(64, K))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = torch.randint(0, len(f_tr), (128,))
    loss = F.cross_entropy(model(f_tr[i]), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(f_te).argmax(1) == y_te).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__RADIUS__', 'x' if bug else 'x_norm')
