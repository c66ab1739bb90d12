"""A speed perturbation applied with probability ``1 - p``: the transform perturbs a clip when ``random() >= p``, so
an augmentation meant for one clip in ten changes nine in ten, and since a speed change shifts every frequency,
most training clips carry the pitch of a neighbouring class -- with no error.

Source: lhotse-speech/lhotse#634 (https://github.com/lhotse-speech/lhotse/issues/634), ``PerturbSpeed``'s
``__call__`` tests ``if random.random() >= self.p`` where the probability of applying it is ``p``; maintainer:
"Good catch!" (fixed by #635). Here eight classes of tones whose fundamental frequencies are spaced by a factor
1.1 are classified from their log magnitude spectrum by an MLP; each training batch goes through a speed
perturbation with factors 0.9 or 1.1 and ``p = 0.1``, the test clips are not perturbed. The buggy transform
perturbs a clip when ``rand() >= p``, the twin when ``rand() < p``. lhotse resamples cuts with torchaudio; here
the speed change is a linear interpolation of the waveform, cut back to its length.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.1220, twin 1.0000
"""

REPORT = "N262"
MECHANISM = "augmentation-probability-inverted"
SLUGS = ()
METRIC = ("test_accuracy", 0.1220, 1.0000)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
L, K = 512, 8
t = torch.arange(L) / L
freqs = 20 * 1.1 ** torch.arange(K)


def clips(n):
    y = torch.randint(0, K, (n,))
    phase = 2 * math.pi * torch.rand(n, 1)
    x = torch.sin(2 * math.pi * freqs[y, None] * t + phase) + 0.5 * torch.sin(4 * math.pi * freqs[y, None] * t)
    return x + 0.3 * torch.randn(n, L), y


x_tr, y_tr = clips(3000)
x_te, y_te = clips(1000)


def perturb_speed(x, p=0.1):
    out = x.clone()
    for j in range(len(x)):
        if __APPLY__:
            factor = 0.9 if torch.rand(()) < 0.5 else 1.1
            n = int(L * 1.2)
            src = torch.arange(n) * factor
            src = src[src <= L - 1]
            lo = src.floor().long()
            hi = (lo + 1).clamp(max=L - 1)
            w = src - lo
            y = x[j, lo] * (1 - w) + x[j, hi] * w
            out[j] = F.pad(y, (0, max(0, L - len(y))))[:L]
    return out


class Spectrum(nn.Module):
    def forward(self, x):
        return torch.log1p(torch.fft.rfft(x).abs())


model = nn.Sequential(Spectrum(), nn.Linear(L // 2 + 1, 64), nn.ReLU(), nn.Linear(64, K))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(250):
    i = torch.randint(0, len(x_tr), (64,))
    loss = F.cross_entropy(model(perturb_speed(x_tr[i])), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x_te).argmax(1) == y_te).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__APPLY__', 'torch.rand(()) >= p' if bug else 'torch.rand(()) < p')
