"""A coordinate embedding whose sinusoids multiply the coordinate by frequencies that grow to about 1000:
``sin(x * div_term)`` with ``div_term = arange(0, C, 2) * (1000 / C)`` instead of ``sin(x / div_term)``, so pixel
coordinates wrap around the sinusoids hundreds of times, nearby points get unrelated embeddings, and a model fed
them fits its training points and fails between them.

Source: aharley/pips#30 (https://github.com/aharley/pips/issues/30): ``get_3d_embedding`` computes
``torch.sin(x * div_term)`` where ``div_term`` is ``torch.arange(0, C, 2) * (1000.0 / C)``; the reporter argues it
should divide by it; maintainer: "I think you are right"; the reporter's tracking improved with the change. Here an
MLP reads the repository's embedding (sines and cosines of each of three coordinates in [0, 64), the raw
coordinates concatenated) and regresses a smooth function of the coordinates from 512 points; the bug multiplies,
the twin divides. The reproduction replaces the tracker by the regression, and starts the frequency index at 2
(``arange(2, C + 2, 2)``) in both scripts so that the division is defined (the repository's index starts at 0, a
constant feature when multiplying).

Metric: test MSE on 2000 new points (plain ``python``, CPU, seed 0; lower is better): bug 0.6709, twin 0.0124
"""

REPORT = "N330"
MECHANISM = "coordinate-embedding-multiplies-by-wavelength"
SLUGS = ()
METRIC = ('test_mse', 0.6709, 0.0124)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
C = 32


def get_3d_embedding(xyz, C):
    x, y, z = xyz[:, 0:1], xyz[:, 1:2], xyz[:, 2:3]
    div_term = (torch.arange(2, C + 2, 2, dtype=torch.float32) * (1000.0 / C)).reshape(1, C // 2)
    pe = []
    for c in (x, y, z):
        p = torch.zeros(xyz.shape[0], C)
        p[:, 0::2] = torch.sin(__ARG__)
        p[:, 1::2] = torch.cos(__ARG__)
        pe.append(p)
    return torch.cat(pe + [xyz], dim=1)


def target(xyz):
    x, y, z = xyz.unbind(1)
    return torch.sin(x / 9.) + torch.cos(y / 13.) * torch.sin(z / 7.)


train_xyz = torch.rand(512, 3) * 64
test_xyz = torch.rand(2000, 3) * 64
model = nn.Sequential(nn.Linear(3 * C + 3, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(150):
    perm = torch.randperm(512)
    for i in range(0, 512, 64):
        xyz = train_xyz[perm[i:i + 64]]
        loss = F.mse_loss(model(get_3d_embedding(xyz, C)).squeeze(1), target(xyz))
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mse = F.mse_loss(model(get_3d_embedding(test_xyz, C)).squeeze(1), target(test_xyz)).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__ARG__', 'c * div_term' if bug
                           else 'c / div_term')
