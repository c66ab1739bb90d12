"""An actor-critic update whose bootstrap action is chosen at the current observation instead of
the next one: the target ``r + gamma * Q_target(next_obs, a')`` evaluates the next state with an
action meant for this state, so wherever the right action changes from one state to the next the
value of going on is underestimated.

Source: siddhanthaldar/ROT#2 (https://github.com/siddhanthaldar/ROT/issues/2), "A bug?":
``dist = self.actor(obs, stddev)`` / ``next_action = dist.sample(...)`` / ``target_Q1, target_Q2 =
self.critic_target(next_obs, next_action)`` -- "This is computing the action for the next
observation, but you write `obs` instead of `next_obs` here"; maintainer: "I had pushed the wrong
script for DAC and have corrected the code now".  Here the actor is the greedy policy of the online
critic on a deterministic chain of 8 states whose advancing action alternates (even states: action 0,
odd states: action 1; the other action ends the episode with reward 0.3; leaving the last state pays
1); the critic is trained offline on every transition with a target network; the bootstrap action is
picked at ``obs`` in the buggy script and at ``next_obs`` in the twin.

Metric: undiscounted return of the greedy policy from the first state (plain ``python``, CPU, seed
0): bug 0.3, twin 1.0.
"""

REPORT = "N86"
MECHANISM = "bootstrap-action-from-current-state"
SLUGS = ()
METRIC = ("greedy_return", 0.3, 1.0)

_SCRIPT = '''
import copy
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N, GAMMA, QUIT = 8, 0.9, 0.3
rows = []
for s in range(N):
    good = s % 2
    last = s == N - 1
    rows.append((s, good, 1.0 if last else 0.0, 0 if last else s + 1, 1.0 if last else 0.0))
    rows.append((s, 1 - good, QUIT, 0, 1.0))
obs, action, reward, next_obs, done = map(torch.tensor, zip(*rows))
reward, done = reward.float(), done.float()
one_hot = lambda s: F.one_hot(s, N).float()

model = nn.Sequential(nn.Linear(N, 32), nn.ReLU(), nn.Linear(32, 2))          # the critic
critic_target = copy.deepcopy(model)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(1500):
    with torch.no_grad():
        next_action = model(one_hot(__ACT_AT__)).argmax(1)             # the actor: greedy on the critic
        target_q = critic_target(one_hot(next_obs)).gather(1, next_action[:, None]).squeeze(1)
        target = reward + GAMMA * (1 - done) * target_q
    q = model(one_hot(obs)).gather(1, action[:, None]).squeeze(1)
    opt.zero_grad()
    F.mse_loss(q, target).backward()
    opt.step()
    if step % 20 == 0:
        critic_target.load_state_dict(model.state_dict())

s, total = 0, 0.0
with torch.no_grad():
    for _ in range(N):
        a = model(one_hot(torch.tensor([s]))).argmax(1).item()
        if a != s % 2:
            total += QUIT
            break
        if s == N - 1:
            total += 1.0
            break
        s += 1
print(f"METRIC {total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ACT_AT__", "obs" if bug else "next_obs")
