"""Returns-to-go computed from rewards stored as a column, ``(T, 1)``, times a discount vector of shape ``(T,)``: the
product broadcasts to a matrix, and ``.sum()`` gives each step the sum of all its future rewards times the sum of all
its discounts, so the value targets an offline-RL model learns are many times too large -- nothing fails.

Source: Howuhh/faster-trajectory-transformer#9 (https://github.com/Howuhh/faster-trajectory-transformer/issues/9): the
dataset's value targets are ``(rewards[t + 1:] * discounts[:-t - 1]).sum()`` with ``rewards`` of shape (T, 1), so
numpy broadcasts a (T - t - 1, T - t - 1) matrix; maintainer: "Indeed, seems like this is a bug from incorrect numpy
broadcasting". Here 200 synthetic trajectories of 20 steps (a position that wanders, a reward of 1 - |position| / 2,
discount 0.9), their discounted returns-to-go computed as in the repository, and an MLP that regresses them from the
position and the time step; the bug multiplies the (T, 1) column, the twin its first column. The reproduction replaces
the trajectory transformer and its discretised values by a value MLP.

Metric: mean squared error of the predicted value against the true discounted return-to-go on 100 new trajectories
(plain ``python``, CPU, seed 0; lower is better): bug 2241.5481, twin 1.2342
"""

REPORT = "N370"
MECHANISM = "returns-to-go-broadcast-to-matrix"
SLUGS = ()
METRIC = ('test_value_mse', 2241.5481, 1.2342)

_SCRIPT = '''import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.RandomState(0)
T, GAMMA = 20, 0.9


def trajectory():
    p = np.clip(np.cumsum(0.3 * rng.randn(T)), -2, 2)
    rewards = (1 - np.abs(p) / 2)[:, None]                 # stored as (T, 1), one column per reward
    states = np.stack([p, np.arange(T) / T], 1)
    return states, rewards


def values_of(rewards):
    discounts = GAMMA ** np.arange(T)
    values = np.zeros(T)
    for t in range(T):
__VALUE__    return values


def true_values(rewards):
    r = rewards[:, 0]
    return np.array([sum(GAMMA ** k * r[t + 1 + k] for k in range(T - t - 1)) for t in range(T)])


def dataset(n, target):
    xs, vs = [], []
    for _ in range(n):
        s, r = trajectory()
        xs.append(s)
        vs.append(target(r))
    return torch.tensor(np.concatenate(xs), dtype=torch.float32), torch.tensor(np.concatenate(vs), dtype=torch.float32)


Xtr, Vtr = dataset(200, values_of)
Xte, Vte = dataset(100, true_values)
model = nn.Sequential(nn.Linear(2, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(500):
    i = torch.randint(0, len(Xtr), (128,))
    loss = F.mse_loss(model(Xtr[i]).squeeze(-1), Vtr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    print(f"METRIC {F.mse_loss(model(Xte).squeeze(-1), Vte).item():.4f}")
'''


def script(bug: bool) -> str:
    value = ('        values[t] = (rewards[t + 1:] * discounts[:-t - 1]).sum()\n' if bug
             else '        values[t] = (rewards[t + 1:, 0] * discounts[:-t - 1]).sum()\n')
    return _SCRIPT.replace('__VALUE__', value)
