"""A normalisation helper that tests its axis with ``if axis:``: ``axis=0`` is falsy, so the features
meant to be scaled each by their own peak are all divided by the global peak, the quiet bands that
carry the class stay near zero next to a loud band, and the classifier learns much less -- with no
error.

Source: audeering/audtorch#28 (https://github.com/audeering/audtorch/pull/28), "Fix normalize axis":
"This ``if-branch`` ... is also triggered by ``axis=0``, which results in the matrix being normalized
by its global maximum absolute value, and not by the local one in axis 0 ... Change ``if axis`` to
``if axis is not None``".  Here each example is a (frames, bands) feature matrix of an audio-like
signal: a loud band of random energy and quiet bands whose pattern over time encodes one of four
classes; every matrix is normalised along axis 0 (each band by its peak over time) before an MLP
classifies it.  The buggy helper tests ``if axis:``, the twin ``if axis is not None:``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.288, twin 1.0
"""

REPORT = "N139"
MECHANISM = "axis-zero-taken-as-none"
SLUGS = ()
METRIC = ("val_accuracy", 0.288, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
FRAMES, BANDS = 16, 6


def normalize(x, axis=None):
    if __TEST__:
        peak = x.abs().amax(dim=axis, keepdim=True)
    else:
        peak = x.abs().max()
    return x / peak


def make(n):
    labels = torch.randint(0, 4, (n,), generator=g)
    t = torch.arange(FRAMES, dtype=torch.float32)
    x = 0.002 * torch.rand(n, FRAMES, BANDS, generator=g)
    x[:, :, 0] = 50.0 * torch.rand(n, 1, generator=g) * (1 + torch.rand(n, FRAMES, generator=g))  # a loud band
    for c in range(4):  # quiet bands: a rhythm per class
        rows = labels == c
        x[rows, :, 1 + c] += 0.01 * (1 + torch.sin(t * (c + 1) * 0.8))
    return torch.stack([normalize(m, axis=0) for m in x]), labels


x_train, y_train = make(2000)
x_val, y_val = make(500)
model = nn.Sequential(nn.Flatten(), nn.Linear(FRAMES * BANDS, 64), nn.ReLU(), nn.Linear(64, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(10):
    for i in range(0, 2000, 64):
        loss = F.cross_entropy(model(x_train[i:i + 64]), y_train[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (model(x_val).argmax(1) == y_val).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TEST__", "axis" if bug else "axis is not None")
