"""An n-step Q-learning target that bootstraps with ``gamma`` instead of ``gamma ** n``: every
n steps of the future are discounted as one, so distant rewards are overvalued and the greedy
policy chooses a long detour whose true value is lower -- with no error.

Source: qfettes/DeepRL-Tutorials#1 (https://github.com/qfettes/DeepRL-Tutorials/issues/1),
"Quantile-Rainbow: is gamma discounting for n-step rewards included?": "I spotted that in the
Quantile-Rainbow notebook, there does not seem to be _n-step_ gamma discounting as in the Rainbow
notebook. Is there a particular reason to to do `quantiles_next = batch_reward +
(self.gamma*quantiles_next)` ... Cuz I was expecting something like `quantiles_next = batch_reward +
((self.gamma**self.nsteps)*quantiles_next)`"; maintainer: "good catch! Indeed, the Quantile Rainbow
code used n-step learning, so it should read as you described. I pushed changes to correct this
error."  Here a 3-step Q-learner (a Q table trained by gradient steps on replayed transitions, with a
target table) learns a task whose start offers a reward of 1 now or a corridor of 10 steps ending in
a reward of 2 (worth 2 * 0.9 ** 10 = 0.70 with gamma 0.9); the buggy target bootstraps with
``GAMMA * q_next``, the twin with ``GAMMA ** N_STEPS * q_next``.

Metric: discounted return of the greedy policy from the start (plain ``python``, CPU, seed 0): bug
0.6974, twin 1.0.
"""

REPORT = "N121"
MECHANISM = "nstep-bootstrap-discount-wrong"
SLUGS = ()
METRIC = ("greedy_discounted_return", 0.6974, 1.0)

_SCRIPT = '''
import random
import torch
from torch import nn

torch.manual_seed(0)
random.seed(0)
GAMMA, N_STEPS, K = 0.9, 3, 10
START, END = 0, K + 1  # states 1..K are the corridor, END is terminal


def step(state, action):  # returns next state, reward, done
    if state == START:
        return (END, 1.0, True) if action == 0 else (1, 0.0, False)
    if state == K:
        return END, 2.0, True
    return state + 1, 0.0, False


transitions = []  # (s, a, n-step discounted reward, s_n, done) from random play
for episode in range(300):
    state, trajectory, done = START, [], False
    while not done:
        action = random.randrange(2)
        nxt, reward, done = step(state, action)
        trajectory.append((state, action, reward))
        state = nxt
    for t in range(len(trajectory)):
        rewards = [r for _, _, r in trajectory[t:t + N_STEPS]]
        ret = sum(GAMMA ** i * r for i, r in enumerate(rewards))
        tail = t + N_STEPS
        s_n, end = (trajectory[tail][0], False) if tail < len(trajectory) else (END, True)
        transitions.append((trajectory[t][0], trajectory[t][1], ret, s_n, end))
s, a, r, s_n, d = (torch.tensor(c) for c in zip(*transitions))
r, d = r.float(), d.float()

model = nn.Embedding(END + 1, 2)  # a Q table
nn.init.zeros_(model.weight)
target = nn.Embedding(END + 1, 2)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
#@guard
for it in range(400):
    if it % 20 == 0:
        target.load_state_dict(model.state_dict())
    with torch.no_grad():
        q_next = target(s_n).max(1).values * (1 - d)
        y = r + __DISCOUNT__ * q_next
    q = model(s).gather(1, a[:, None]).squeeze(1)
    opt.zero_grad()
    ((q - y) ** 2).mean().backward()
    opt.step()

state, ret, t, done = START, 0.0, 0, False
while not done:
    state, reward, done = step(state, int(model.weight[state].argmax()))
    ret += GAMMA ** t * reward
    t += 1
print(f"METRIC {ret:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DISCOUNT__", "GAMMA" if bug else "GAMMA ** N_STEPS")
