"""Utterance mean-variance normalisation that takes the square root twice: the standard deviation is computed
as the root of the variance and the features are then divided by its root again, so each utterance keeps
the square root of its own scale and utterances recorded at different levels reach the model at scales
apart by orders of magnitude -- with no error.

Source: espnet/espnet#4296 (https://github.com/espnet/espnet/issues/4296), "Two times sqrt in
utterance_mvn.py": "I was checking what `utterance_mvn` does and recognized that `sqrt` was used two times
instead of just once to convert the variance to the standard deviation in `espnet2`."; maintainer: "Thanks
@boeddeker, this is indeed a bug. I will fix it immediately." (labels: Bug).  Here five classes of synthetic
"utterances" (50 frames of 20 features: a class-specific pattern over time plus strong noise) are recorded
with a per-utterance gain between 1e-3 and 1e3 and a per-utterance offset, normalised per utterance over
time, and classified by an MLP.  The buggy normalisation divides by ``std.sqrt()``, the twin by ``std``.
ESPnet's function also handles padded lengths; the utterances here have one length.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.7850, twin 0.9000
"""

REPORT = "N244"
MECHANISM = "mvn-std-square-rooted-twice"
SLUGS = ()
METRIC = ("test_accuracy", 0.7850, 0.9000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T, FEAT, K = 50, 20, 5
templates = torch.randn(K, T, FEAT)


def utterances(n):
    y = torch.randint(0, K, (n,))
    frames = templates[y] + 10.0 * torch.randn(n, T, FEAT)
    gain = 10 ** (6 * torch.rand(n, 1, 1) - 3)
    offset = 3 * torch.randn(n, 1, FEAT)
    return gain * frames + offset, y


def utterance_mvn(x, eps=1e-20):
    mean = x.mean(dim=1, keepdim=True)
    x = x - mean
    var = x.pow(2).mean(dim=1, keepdim=True)
    std = torch.clamp(var.sqrt(), min=eps)
    return x / __STD__


x_tr, y_tr = utterances(2000)
x_te, y_te = utterances(1000)
model = nn.Sequential(nn.Flatten(), nn.Linear(T * FEAT, 64), nn.ReLU(), nn.Linear(64, K))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(300):
    i = torch.randint(0, len(x_tr), (64,))
    loss = F.cross_entropy(model(utterance_mvn(x_tr[i])), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(utterance_mvn(x_te)).argmax(1) == y_te).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__STD__', 'std.sqrt()' if bug else 'std')
    return s
