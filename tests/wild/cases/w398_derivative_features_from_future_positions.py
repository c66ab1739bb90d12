"""Velocities and accelerations derived with ``np.gradient`` over the whole trajectory and then cut to the observed
history: ``np.gradient``'s central difference at the last observed step uses the first future position, so every
training and test input carries a piece of the future the model is asked to predict, and the reported error is
lower than the model can achieve on a history alone -- nothing fails.

Source: StanfordASL/Trajectron-plus-plus#40 (https://github.com/StanfordASL/Trajectron-plus-plus/issues/40):
derivatives computed with ``np.gradient``, whose central differences give the last observed step "information about
the future time steps"; the maintainer points to his answer in #26, the fix is on master, and in #53 he accepts
re-run numbers (ETH ADE 0.43 -> 0.67 once fixed). Here synthetic pedestrians (a noisy turning walk, 0.4 s steps),
eight observed positions, velocities and accelerations by ``np.gradient``, and an MLP that predicts the next six
positions; the bug differentiates the whole 14-step trajectory and keeps its first eight steps, the twin
differentiates the eight observed steps only (accelerations from those velocities in both). The reproduction
replaces the scene graphs and the CVAE by an MLP on one agent.

Metric: average displacement error of the six predicted positions on 500 test trajectories (plain ``python``, CPU,
seed 0; lower is better; the bug's number is the reported one, with the future in its inputs): bug 0.2888,
twin 0.4091
"""

REPORT = "N372"
MECHANISM = "derivative-features-from-future-positions"
SLUGS = ()
METRIC = ('test_ade', 0.2888, 0.4091)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.RandomState(0)
HIST, FUT, DT = 8, 6, 0.4


def trajectory():
    # a pedestrian walking with a slowly turning, noisy velocity
    n = HIST + FUT
    heading = rng.uniform(0, 2 * np.pi) + np.cumsum(0.25 * rng.randn(n))
    speed = 1.0 + 0.3 * rng.randn()
    vel = speed * np.stack([np.cos(heading), np.sin(heading)], 1)
    return np.cumsum(vel * DT, 0)


def sample():
    pos = trajectory()
__VELOCITY__    a = np.gradient(v, DT, axis=0)
    hist = pos[:HIST] - pos[HIST - 1]
    x = np.concatenate([hist, v, a], 1).ravel()
    y = (pos[HIST:] - pos[HIST - 1]).ravel()
    return x, y


def dataset(n):
    xs, ys = zip(*[sample() for _ in range(n)])
    return torch.tensor(np.array(xs), dtype=torch.float32), torch.tensor(np.array(ys), dtype=torch.float32)


Xtr, Ytr = dataset(2000)
Xte, Yte = dataset(500)
model = nn.Sequential(nn.Linear(HIST * 6, 128), nn.ReLU(), nn.Linear(128, FUT * 2))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    i = torch.randint(0, 2000, (64,))
    loss = F.mse_loss(model(Xtr[i]), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    err = (model(Xte) - Yte).view(-1, FUT, 2).norm(dim=-1).mean().item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    velocity = ('    v = np.gradient(pos, DT, axis=0)[:HIST]             # the whole scene, then the cut\n'
                if bug else
                '    v = np.gradient(pos[:HIST], DT, axis=0)             # the observed history only\n')
    return _SCRIPT.replace('__VELOCITY__', velocity)
