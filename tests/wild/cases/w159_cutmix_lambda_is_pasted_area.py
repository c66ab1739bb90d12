"""CutMix whose label weight ``lam`` is the fraction of the image covered by the pasted box, while the
loss gives ``lam`` to the original image's label: the label weights are the wrong way round, so a
small patch from another image takes most of the label -- with no error.

Source: kornia/kornia#3077 (https://github.com/kornia/kornia/issues/3077), "lam is computed
incorrectly in RandomCutMixV2": "should be: ``lam = 1 - w.to(input.dtype) * h.to(input.dtype) / (width
* height)`` ... If aligning to the way the loss is computed in the paper, i.e lambda multiplies the
loss that is computed with the first label"; a maintainer: "did you consider that or is it definitely
a bug ?"; fixed by #3297 ("Correct lambda calculation in Cutmix.py as mentioned in #3077").  Here an
MLP is trained on 8x8 digits with CutMix on every batch (box area uniform in [0, 0.3]) and the loss
``lam * CE(y) + (1 - lam) * CE(y[perm])``; the buggy ``lam`` is the pasted area, the twin's is one
minus it.

Metric: validation accuracy on clean digits (plain ``python``, CPU, seed 0): bug 0.869, twin 0.9018
"""

REPORT = "N133"
MECHANISM = "mix-label-weight-inverted"
SLUGS = ()
METRIC = ("val_accuracy", 0.869, 0.9018)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
Y = torch.tensor(d.target)


def cutmix(x):
    n, _, height, width = x.shape
    cut = (0.3 * torch.rand(())).sqrt()  # side ratio, so the area is uniform in [0, 0.3]
    h, w = int(round(height * cut.item())), int(round(width * cut.item()))
    top, left = torch.randint(0, height - h + 1, ()).item(), torch.randint(0, width - w + 1, ()).item()
    perm = torch.randperm(n)
    mixed = x.clone()
    mixed[:, :, top:top + h, left:left + w] = x[perm, :, top:top + h, left:left + w]
    lam = __LAM__
    return mixed, perm, lam


model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    order = torch.randperm(1400)
    for i in range(0, 1400, 32):
        b = order[i:i + 32]
        x, perm, lam = cutmix(X[b])
        out = model(x)
        loss = lam * F.cross_entropy(out, Y[b]) + (1 - lam) * F.cross_entropy(out, Y[b][perm])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    lam = "w * h / (width * height)" if bug else "1 - w * h / (width * height)"
    return _SCRIPT.replace("__LAM__", lam)
