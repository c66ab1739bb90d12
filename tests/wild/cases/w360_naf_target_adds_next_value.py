"""A NAF critic whose TD target adds the next state's value instead of discounting it:
``reward + gamma * mask + next_value`` where ``reward + gamma * mask * next_value`` was meant, so the target is
undiscounted and shifted by ``gamma`` at every backup, the value estimates climb without bound, and the greedy
policy read from the advantage term comes out worse -- nothing fails, the loss is just a regression to moving
targets.

Source: ikostrikov/pytorch-ddpg-naf#16 (https://github.com/ikostrikov/pytorch-ddpg-naf/issues/16): the reporter
points at NAF's update, ``expected_state_action_values = reward_batch + (self.gamma * mask_batch +
next_state_values)``, which should multiply by the next state's value; maintainer: "Fixed in d900aa6". Here a
one-dimensional NAF (value, ``tanh`` mean action, a positive precision) learns off-policy from 5000 random
transitions of a point that moves by a quarter of its action towards 0 and is rewarded ``-|s'|``, with a soft-
updated target network; the bug adds, the twin multiplies. The reproduction replaces the MuJoCo tasks and the
exploration loop by the fixed batch of transitions, and its metric is the greedy policy's return over 20 steps from
100 start states.

Metric: the greedy policy's mean return (plain ``python``, CPU, seed 0; higher is better): bug -7.7186, twin
-5.7208
"""

REPORT = "N334"
MECHANISM = "td-target-adds-next-value-instead-of-discounting"
SLUGS = ()
METRIC = ('greedy_return', -7.7186, -5.7208)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
gamma, tau = 0.9, 0.05


class NAF(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(1, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh())
        self.V = nn.Linear(64, 1)
        self.mu = nn.Linear(64, 1)
        self.L = nn.Linear(64, 1)

    def forward(self, s, a=None):
        h = self.body(s)
        V, mu = self.V(h), torch.tanh(self.mu(h))
        if a is None:
            return mu, V
        P = self.L(h).exp() ** 2
        return mu, V - 0.5 * P * (a - mu) ** 2, V


def step(s, a):
    s2 = (s + 0.25 * a).clamp(-3., 3.)
    return s2, -s2.abs()


model, target = NAF(), NAF()
target.load_state_dict(model.state_dict())
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
S = torch.rand(5000, 1) * 6 - 3
A = torch.rand(5000, 1) * 2 - 1
S2, R = step(S, A)
mask = torch.ones(5000, 1)
#@guard
for it in range(1500):
    i = torch.randint(0, 5000, (128,))
    with torch.no_grad():
        _, v_next = target(S2[i])
        expected = __TARGET__
    _, q, _ = model(S[i], A[i])
    loss = F.mse_loss(q, expected)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        for p, tp in zip(model.parameters(), target.parameters()):
            tp.mul_(1 - tau).add_(tau * p)
with torch.no_grad():
    s = torch.linspace(-3, 3, 100)[:, None]
    ret = torch.zeros(100, 1)
    for t in range(20):
        a, _ = model(s)
        s, r = step(s, a)
        ret += r
print(f"METRIC {ret.mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__TARGET__', 'R[i] + gamma * mask[i] + v_next' if bug
                           else 'R[i] + gamma * mask[i] * v_next')
