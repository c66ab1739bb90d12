"""Value targets built from the advantage buffer before the advantages are written into it: the returns are
computed as ``storage.advantages + storage.values`` while ``storage.advantages`` still holds the zeros it was
allocated with, so every value target equals the critic's own prediction and the critic never learns -- with
no error.

Source: vwxyzjn/cleanrl#337 (https://github.com/vwxyzjn/cleanrl/pull/337), "bug: incorrect logic in GAE
calculation" (maintainer's own fix, merged): "#334 actually introduced a major bug... It's totally my bad ...
`returns=storage.advantages + storage.values` should have been the following because `storage.advantages` has
zero values ... `returns=advantages + storage.values`".  Here an actor-critic (two small MLPs over one-hot
states) is trained with GAE (gamma 0.9, lambda 0.95) on a ten-state chain (move left or right, reward 1 on
reaching the right end, which restarts the episode at the left end; rollouts of 20 steps in 16 environments)
with a storage written like the report's (advantages allocated as zeros, filled by ``storage.replace``).  The
buggy update computes the returns from ``storage.advantages``, the twin from the freshly computed
``advantages``.

Metric: mean absolute error of the critic against the true state values of the final policy (computed by
policy evaluation on the known chain; plain ``python``, CPU, seed 0): bug 0.4939, twin 0.0003 (lower is better)
"""

REPORT = "N210"
MECHANISM = "returns-from-unwritten-advantage-buffer"
SLUGS = ()
METRIC = ("value_abs_error", 0.4939, 0.0003)

_SCRIPT = '''
from dataclasses import dataclass, replace
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
S, N_ENV, STEPS, GAMMA, LAM = 10, 16, 20, 0.9, 0.95


def step_env(s, a):
    s2 = (s + torch.where(a == 1, 1, -1)).clamp(0, S - 1)
    r = (s2 == S - 1).float()
    done = s2 == S - 1
    return torch.where(done, torch.zeros_like(s2), s2), r, done


@dataclass
class Storage:
    obs: torch.Tensor
    actions: torch.Tensor
    logprobs: torch.Tensor
    rewards: torch.Tensor
    dones: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


actor = nn.Sequential(nn.Linear(S, 32), nn.Tanh(), nn.Linear(32, 2))
critic = nn.Sequential(nn.Linear(S, 32), nn.Tanh(), nn.Linear(32, 1))
model = nn.ModuleList([actor, critic])
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
onehot = torch.eye(S)
state = torch.zeros(N_ENV, dtype=torch.long)
#@guard
for update in range(300):
    z = torch.zeros(STEPS, N_ENV)
    storage = Storage(obs=torch.zeros(STEPS, N_ENV, dtype=torch.long), actions=z.long(), logprobs=z.clone(),
                      rewards=z.clone(), dones=z.clone(), values=z.clone(), advantages=z.clone(), returns=z.clone())
    with torch.no_grad():
        for t in range(STEPS):
            dist = torch.distributions.Categorical(logits=actor(onehot[state]))
            a = dist.sample()
            storage.obs[t], storage.actions[t], storage.logprobs[t] = state, a, dist.log_prob(a)
            storage.values[t] = critic(onehot[state]).squeeze(1)
            state, r, done = step_env(state, a)
            storage.rewards[t], storage.dones[t] = r, done.float()
        next_value = critic(onehot[state]).squeeze(1)
        advantages = torch.zeros(STEPS, N_ENV)
        last = torch.zeros(N_ENV)
        for t in reversed(range(STEPS)):
            nv = next_value if t == STEPS - 1 else storage.values[t + 1]
            nonterminal = 1.0 - storage.dones[t]
            delta = storage.rewards[t] + GAMMA * nv * nonterminal - storage.values[t]
            last = delta + GAMMA * LAM * nonterminal * last
            advantages[t] = last
        storage = replace(storage, advantages=advantages, returns=__RETURNS__ + storage.values)
    obs = onehot[storage.obs.reshape(-1)]
    logits = actor(obs)
    logp = torch.distributions.Categorical(logits=logits).log_prob(storage.actions.reshape(-1))
    adv = storage.advantages.reshape(-1)
    adv = (adv - adv.mean()) / (adv.std() + 1e-8)
    v_loss = F.mse_loss(critic(obs).squeeze(1), storage.returns.reshape(-1))
    loss = -(logp * adv).mean() + 0.5 * v_loss
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    pi = torch.softmax(actor(onehot), 1)
    v_true = torch.zeros(S)
    for _ in range(500):
        new = torch.zeros(S)
        for s in range(S - 1):
            for a, move in ((0, -1), (1, 1)):
                s2 = min(max(s + move, 0), S - 1)
                r = 1.0 if s2 == S - 1 else 0.0
                new[s] += pi[s, a] * (r + (0.0 if s2 == S - 1 else GAMMA * v_true[s2]))
        v_true = new
    err = (critic(onehot).squeeze(1)[:S - 1] - v_true[:S - 1]).abs().mean()
print(f"METRIC {err.item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RETURNS__", "storage.advantages" if bug else "advantages")
