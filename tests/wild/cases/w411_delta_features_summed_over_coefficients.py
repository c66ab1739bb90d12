"""Delta (regression) features of cepstral frames summed without an axis: each frame's per-coefficient taps collapse
into one scalar copied across every coefficient, so the deltas say how the frame as a whole changes and nothing about
which coefficients rise or fall -- nothing fails and the features have the right shape.

Source: nationalparkservice/acoustic_discovery#15 (https://github.com/nationalparkservice/acoustic_discovery/pull/15):
the delta-MFCC function sums the regression taps without an axis, "so each frame's per-coefficient vector collapses
into one scalar that's then copied across every cepstral coefficient", and normalises over ``range(N)`` instead of
``range(1, N + 1)`` (the pull request's author checks the fix against an independent reference; unmerged, the
maintainer answers that the repository is no longer maintained). Here four classes of synthetic 13-coefficient,
40-frame cepstrograms that differ only in which coefficients rise over time and which fall (same mean frame, same
summed slope), featurised as the mean frame and the mean deltas and delta-deltas (two frames either side), and an
MLP classifier; the bug computes the deltas as the pull request found them, the twin per coefficient with the
``range(1, N + 1)`` denominator. The reproduction replaces bird-call recordings and their MFCCs by synthetic frames.

Metric: test accuracy on 160 new cepstrograms (plain ``python``, CPU, seed 0): bug 0.4688, twin 1.0
"""

REPORT = "N385"
MECHANISM = "delta-features-summed-over-coefficients"
SLUGS = ()
METRIC = ('test_accuracy', 0.4688, 1.0)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.RandomState(0)
# cepstral-like frames: 13 coefficients over 40 frames; a class is which half of the coefficients rises over
# time and which falls (every class has the same mean frame and the same summed slope)
C, T, N_PER = 13, 40, 60
patterns = np.array([[1] * 6 + [-1] * 7, [-1] * 6 + [1] * 7, [1, -1] * 6 + [1], [-1, 1] * 6 + [-1]], float)
t = np.linspace(-1, 1, T)


def make(n):
    xs, ys = [], []
    for c, pat in enumerate(patterns):
        for _ in range(n):
            base = rng.randn(C, 1)
            xs.append(base + 0.8 * pat[:, None] * t[None, :] + 0.3 * rng.randn(C, T))
            ys.append(c)
    return np.array(xs), np.array(ys)


def deltas(frames, N=2):
    # regression deltas over +-N frames, per coefficient (frames: coefficients x time)
    padded = np.pad(frames, ((0, 0), (N, N)), mode='edge')
    out = np.zeros_like(frames)
    for i in range(frames.shape[1]):
        taps = [n * (padded[:, i + N + n] - padded[:, i + N - n]) for n in range(1, N + 1)]
__DELTA__    return out


def features(xs):
    return np.array([np.concatenate([x.mean(1), deltas(x).mean(1), deltas(deltas(x)).mean(1)]) for x in xs])


Xtr, ytr = make(N_PER)
Xte, yte = make(40)
Ftr, Fte = features(Xtr), features(Xte)
mu, sd = Ftr.mean(0), Ftr.std(0) + 1e-6
Ftr, Fte = torch.tensor((Ftr - mu) / sd, dtype=torch.float32), torch.tensor((Fte - mu) / sd, dtype=torch.float32)
ytr, yte = torch.tensor(ytr), torch.tensor(yte)
model = nn.Sequential(nn.Linear(3 * C, 32), nn.ReLU(), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    loss = F.cross_entropy(model(Ftr), ytr)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(Fte).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    delta = ('        out[:, i] = np.sum(taps) / (2 * sum(n ** 2 for n in range(N)))\n' if bug
             else '        out[:, i] = np.sum(taps, axis=0) / (2 * sum(n ** 2 for n in range(1, N + 1)))\n')
    return _SCRIPT.replace('__DELTA__', delta)
