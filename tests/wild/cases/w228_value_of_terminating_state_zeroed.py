"""TD value targets computed after zeroing the value of every state whose step ends the episode, instead of
masking the bootstrap *past* the termination: the state just before the terminal transition is then
bootstrapped from 0, so with ``lambda = 0`` the terminal reward never reaches the states before it and their
learned values collapse to zero -- with no error.

Source: ray-project/ray#57683 (https://github.com/ray-project/ray/issues/57683), "[RLlib] PPO: States' values
aren't counted if the next action terminates the episode." (labels: bug): "I've created a very simple
environment consisting of two timesteps, followed by a reward, and am trying to train PPO to predict value
accurately on this environment with `lambda=0` ... Shouldn't the value target at positions `0` and `3` be
equal to `gamma*0.95` instead of zero?"; the merged fix (#59958): "`compute_value_targets` zeros out the values
of states that are followed by a termination before calculating the intermediates used for value
bootstrapping ... In effect, this means that, in an environment with terminal rewards, we only learn a policy
for the very last timestep!".  Here a value network is fitted by TD(0) (``lambda_ = 0``) on episodes of a
six-step chain with a reward of 1 on the terminating step, each episode extended by one timestep for the
bootstrap value as RLlib does.  The buggy target computation multiplies the values by ``1 - terminateds``
before shifting them; the twin masks the shifted (next-state) values.

Metric: mean absolute error of the learned state values against the true discounted returns (plain
``python``, CPU, seed 0): bug 0.7164, twin 0.0039 (lower is better)
"""

REPORT = "N202"
MECHANISM = "value-of-terminating-state-zeroed"
SLUGS = ()
METRIC = ("value_abs_error", 0.7164, 0.0039)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T, gamma = 6, 0.95
obs = torch.eye(T + 1)  # states 0..T-1 of the chain, and the observation after the last step
rewards = torch.zeros(T)
rewards[-1] = 1.0
terminateds = torch.zeros(T)
terminateds[-1] = 1.0
true_values = gamma ** torch.arange(T - 1, -1, -1, dtype=torch.float32)

critic = nn.Sequential(nn.Linear(T + 1, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.Adam(critic.parameters(), lr=1e-2)


def compute_value_targets(values, rewards, terminateds, gamma, lambda_=0.0):
    """values: one per observation of the episode extended by one timestep (T + 1)."""
    __TARGETS__


#@guard
for it in range(600):
    with torch.no_grad():
        values = critic(obs).squeeze(1)
        targets = compute_value_targets(values, rewards, terminateds, gamma)
    loss = F.mse_loss(critic(obs[:T]).squeeze(1), targets)
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    err = (critic(obs[:T]).squeeze(1) - true_values).abs().mean()
print(f"METRIC {err.item():.4f}")
'''

_BUG = """values = values * (1.0 - torch.cat([terminateds, torch.zeros(1)]))
    return rewards + gamma * values[1:] * (1.0 - terminateds)"""
_TWIN = """next_values = values[1:] * (1.0 - terminateds)
    return rewards + gamma * next_values"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TARGETS__", _BUG if bug else _TWIN)
