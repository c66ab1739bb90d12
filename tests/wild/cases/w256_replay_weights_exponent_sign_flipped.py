"""Prioritised replay whose importance-sampling weights carry the wrong sign in their exponent: the weight is
written ``(1 / N / P(i)) ** -beta``, which is ``(N * P(i)) ** beta``, so the transitions sampled most often
are weighted up instead of down and the update is biased twice over towards them -- with no error.

Source: takoika/PrioritizedExperienceReplay#1 (https://github.com/takoika/PrioritizedExperienceReplay/issues/1),
"Invalid weight computation": "I realized that the weight is computed as `(1./self.memory_size/priority)**-beta`.
However, according to the original paper, it should be `(self.memory_size * priority)**-beta` [or]
`(1./self.memory_size/priority)**beta`. Also, the weights should be normalized by the maximum weight";
maintainer: "Your indication is exactly on target. I fixed two places on code."  Here a linear value function
of ``[s, s**2]`` is fitted to noisy Monte Carlo returns held in a replay memory of 4,000 states, with
proportional prioritisation on the absolute error (alpha 0.7, beta 1, weights normalised by their maximum);
the returns are much noisier for ``s > 1``, where the priorities concentrate.  The buggy weight uses the
exponent ``-beta``, the twin ``beta``.  The repository replays Atari transitions for a DQN; the TD target is
replaced by fixed returns so that the bias shows in a known value function.

Metric: test MSE of the fitted values against the true ones (plain ``python``, CPU, seed 0): bug 0.5592, twin
0.4101 (lower is better)
"""

REPORT = "N230"
MECHANISM = "importance-weight-exponent-sign-flipped"
SLUGS = ()
METRIC = ("test_value_mse", 0.5592, 0.4101)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
# a replay memory of (state features, Monte Carlo return) pairs; the value function is linear in the
# features and cannot fit the returns exactly, so where it spends its capacity depends on the sampling
N = 4000
states = torch.rand(N, 1) * 4 - 2
feats = torch.cat([states, states ** 2], 1)
noise = 0.1 + 3.0 * (states[:, 0] > 1).float()
returns = torch.sin(2 * states[:, 0]) + 0.5 * states[:, 0] ** 2 + noise * torch.randn(N)
test_s = torch.rand(2000, 1) * 4 - 2
test_f = torch.cat([test_s, test_s ** 2], 1)
test_v = torch.sin(2 * test_s[:, 0]) + 0.5 * test_s[:, 0] ** 2

model = nn.Linear(2, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.05)
alpha, beta, eps = 0.7, 1.0, 1e-3
priority = torch.ones(N)
#@guard
for step in range(1500):
    prob = priority ** alpha / (priority ** alpha).sum()
    idx = torch.multinomial(prob, 64, replacement=True)
    weight = (1.0 / N / prob[idx]) ** __BETA__
    weight = weight / weight.max()
    err = model(feats[idx]).squeeze(1) - returns[idx]
    loss = (weight * err ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    priority[idx] = err.detach().abs() + eps
with torch.no_grad():
    mse = F.mse_loss(model(test_f).squeeze(1), test_v).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__BETA__', '-beta' if bug else 'beta')
    return s
