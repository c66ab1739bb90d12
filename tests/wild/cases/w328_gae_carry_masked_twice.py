"""A GAE scan that masks its carry a second time after the masked recursion: ``last = advantage[t] * (1 - done[t])``
zeroes the carry on an episode's last step, so that step's advantage -- the one holding the final reward -- never
reaches the step before it, and a reward that only the final step sees is credited to no earlier action -- with no
error.

Source: alessiodm/drl-zh#13 (https://github.com/alessiodm/drl-zh/issues/13), ``gae_advantages_and_returns()`` in the
PPO notebook: after ``advantages[t] = td_error + gamma * gae_lambda * next_non_terminal * last_gae_lambda`` it set
``last_gae_lambda = advantages[t] * next_non_terminal``; maintainer: "You're correct—and you actually caught a bug.
Masking inside the recursion already 'does the job' within a trajectory". Here episodes of 5 steps pay 1 at the last
step when the first action was 1; the policy and the value see only the time step (not the first action), and an
actor-critic with GAE (gamma 1, lambda 0.95) written like the notebook's is trained on segments of 40 episodes; the
bug masks the carry again, the twin carries ``advantages[t]``. The notebook's PPO clipping and Gym environment are
replaced by a plain policy gradient on the toy episodes.

Metric: probability of the rewarded first action after training (plain ``python``, CPU, seed 0): bug 0.6234, twin
0.9955
"""

REPORT = "N302"
MECHANISM = "gae-carry-masked-after-terminal-step"
SLUGS = ()
METRIC = ("rewarded_action_probability", 0.6234, 0.9955)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T, EPISODES, GAMMA, LAMBDA = 5, 40, 1.0, 0.95


class ActorCritic(nn.Module):
    def __init__(self):
        super().__init__()
        self.actor = nn.Linear(T, 2)
        self.critic = nn.Linear(T, 1)

    def forward(self, steps):
        x = F.one_hot(steps, T).float()
        return self.actor(x), self.critic(x).squeeze(-1)


def gae(rewards, values, dones):
    advantages = torch.zeros_like(rewards)
    last_gae_lambda, next_return = 0.0, 0.0
    for t in reversed(range(len(rewards))):
        next_non_terminal = 1.0 - dones[t]
        td_error = rewards[t] + GAMMA * next_return * next_non_terminal - values[t]
        advantages[t] = td_error + GAMMA * LAMBDA * next_non_terminal * last_gae_lambda
        next_return = values[t]
        __CARRY__
    return advantages


model = ActorCritic()
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
steps = torch.arange(T).repeat(EPISODES)
dones = (steps == T - 1).float()
#@guard
for update in range(150):
    logits, values = model(steps)
    dist = torch.distributions.Categorical(logits=logits)
    actions = dist.sample()
    rewards = torch.zeros(len(steps))
    rewards[T - 1::T] = (actions[::T] == 1).float()
    advantages = gae(rewards, values.detach(), dones)
    returns = advantages + values.detach()
    loss = -(dist.log_prob(actions) * advantages).mean() + 0.5 * F.mse_loss(values, returns)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    p = F.softmax(model(torch.zeros(1, dtype=torch.long))[0], -1)[0, 1].item()
print(f"METRIC {p:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CARRY__', 'last_gae_lambda = advantages[t] * next_non_terminal' if bug
                           else 'last_gae_lambda = advantages[t]')
