"""An epsilon-greedy schedule whose subtraction and division are ordered by Python's precedence, not
by the author's intent: ``eps_start - step + 1 / eps_last_frame`` drops below ``eps_end`` after the
first step, so the agent explores for one step and then acts greedily on an untrained Q-network --
with no error.

Source: Lightning-AI/pytorch-lightning#9620 (https://github.com/Lightning-AI/pytorch-lightning/issues/9620),
"Bug in epsilon usage in Deep-Q example code" (labels: bug / fix): "Order of operations is incorrect
in epsilon computation ... ``epsilon = max(self.eps_end, self.eps_start - self.global_step + 1 /
self.eps_last_frame)`` This locks ``epsilon`` to ``self.eps_end`` since this value is always <=1".
Here a Q-network (one linear layer on one-hot states, zero at first) learns a 10-state chain: the left end, one
step from the start, pays 0.1; the right end, seven steps away, pays 1.  The buggy schedule is the
report's line, the twin decays epsilon linearly over the first 4000 steps
(``eps_start - (step + 1) / eps_last_frame``).

Metric: discounted return of the greedy policy after 800 episodes (gamma 0.9, plain ``python``, CPU,
seed 0): bug 0.1, twin 0.4783
"""

REPORT = "N131"
MECHANISM = "exploration-schedule-precedence"
SLUGS = ()
METRIC = ("greedy_discounted_return", 0.1, 0.4783)

_SCRIPT = '''
import random

import torch
from torch import nn

torch.manual_seed(0)
random.seed(0)
N, START, GAMMA = 10, 1, 0.9


def env_step(s, a):
    s2 = s + (1 if a == 1 else -1)
    if s2 == 0:
        return s2, 0.1, True
    if s2 == N - 1:
        return s2, 1.0, True
    return s2, 0.0, False


def onehot(s):
    return torch.nn.functional.one_hot(torch.tensor(s), N).float()


q = nn.Linear(N, 2, bias=False)
nn.init.zeros_(q.weight)  # a tabular Q-function, all actions equal at first
opt = torch.optim.Adam(q.parameters(), lr=0.05)
eps_start, eps_end, eps_last_frame = 1.0, 0.01, 4000
global_step = 0
#@guard
for episode in range(800):
    s = START
    for t in range(30):
        epsilon = max(eps_end, __EPSILON__)
        if random.random() < epsilon:
            a = random.randrange(2)
        else:
            with torch.no_grad():
                a = int(q(onehot(s)).argmax())
        s2, r, done = env_step(s, a)
        with torch.no_grad():
            target = r + (0.0 if done else GAMMA * q(onehot(s2)).max().item())
        loss = (q(onehot(s))[a] - target) ** 2
        opt.zero_grad()
        loss.backward()
        opt.step()
        global_step += 1
        s = s2
        if done:
            break

s, ret, disc = START, 0.0, 1.0
for t in range(30):
    with torch.no_grad():
        a = int(q(onehot(s)).argmax())
    s, r, done = env_step(s, a)
    ret += disc * r
    disc *= GAMMA
    if done:
        break
print(f"METRIC {ret:.4f}")
'''


def script(bug: bool) -> str:
    schedule = ("eps_start - global_step + 1 / eps_last_frame" if bug
                else "eps_start - (global_step + 1) / eps_last_frame")
    return _SCRIPT.replace("__EPSILON__", schedule)
