"""A DQN whose soft target update (tau = 0.005) runs once per episode instead of after every optimisation step: the
target network stays fixed for a whole episode and, over a short run, barely leaves its initial weights, so the
bootstrapped targets keep the initial network's values and the reward at the far end of the chain does not propagate
back -- the greedy policy settles for the near, smaller reward. Nothing fails.

Source: pytorch/tutorials#2110 (https://github.com/pytorch/tutorials/pull/2110), "update target network weight
during episode after x timesteps": "Currently the target network remain fixed during the entire episode. In this PR
I have moved the update of the weigths inside the inner loop of the training. So the update can occure during the
episode. Without this change, if the episode is too long, the target network will be too different from the
behavior network."; maintainer: "LGTM thanks for spotting this!" (merged). Here a 12-state chain (reward 0.2 at the
left end, 1.0 at the right end, gamma 0.97, episodes of at most 40 steps from a random start) is learned by a DQN with
a replay memory, an Adam-trained MLP on one-hot states and the tutorial's soft update; the bug calls the soft update
after each episode, the twin after each step. The reproduction replaces CartPole and the tutorial's network by the
chain and a small MLP, and counts 4000 environment steps.

Metric: the greedy policy's discounted return averaged over the 10 non-terminal start states (plain ``python``, CPU,
seed 0): bug 0.5651, twin 0.8753
"""

REPORT = "N365"
MECHANISM = "soft-target-update-once-per-episode"
SLUGS = ()
METRIC = ('greedy_return', 0.5651, 0.8753)

_SCRIPT = '''import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
N, GAMMA, TAU = 12, 0.97, 0.005


def step(s, a):
    s2 = s + (1 if a == 1 else -1)
    if s2 == 0:
        return s2, 0.2, True
    if s2 == N - 1:
        return s2, 1.0, True
    return s2, 0.0, False


def onehot(s):
    return F.one_hot(torch.as_tensor(s), N).float()


policy = nn.Sequential(nn.Linear(N, 64), nn.ReLU(), nn.Linear(64, 2))
target = nn.Sequential(nn.Linear(N, 64), nn.ReLU(), nn.Linear(64, 2))
target.load_state_dict(policy.state_dict())
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
model = policy
#@guard
memory = []


def soft_update():
    sd, td = policy.state_dict(), target.state_dict()
    for k in sd:
        td[k] = sd[k] * TAU + td[k] * (1 - TAU)
    target.load_state_dict(td)


steps = 0
while steps < 4000:
    s, done, t = random.randint(1, N - 2), False, 0
    while not done and t < 40:
        if random.random() < 0.3:
            a = random.randint(0, 1)
        else:
            with torch.no_grad():
                a = policy(onehot(s)).argmax().item()
        s2, r, done = step(s, a)
        memory.append((s, a, r, s2, done))
        s, t, steps = s2, t + 1, steps + 1
        if len(memory) >= 64:
            batch = random.sample(memory[-5000:], 64)
            bs = onehot([b[0] for b in batch])
            ba = torch.tensor([b[1] for b in batch])
            br = torch.tensor([b[2] for b in batch])
            bs2 = onehot([b[3] for b in batch])
            bd = torch.tensor([float(b[4]) for b in batch])
            q = policy(bs).gather(1, ba[:, None]).squeeze(1)
            with torch.no_grad():
                y = br + GAMMA * (1 - bd) * target(bs2).max(1).values
            loss = F.smooth_l1_loss(q, y)
            opt.zero_grad()
            loss.backward()
            opt.step()
__UPDATE__

def greedy_return(s):
    for t in range(40):
        with torch.no_grad():
            a = policy(onehot(s)).argmax().item()
        s, r, done = step(s, a)
        if done:
            return r * GAMMA ** t
    return 0.0


ret = sum(greedy_return(s) for s in range(1, N - 1)) / (N - 2)
print(f"METRIC {ret:.4f}")
'''


def script(bug: bool) -> str:
    update = ('    soft_update()\n' if bug else '        soft_update()\n')
    return _SCRIPT.replace('__UPDATE__', update)
