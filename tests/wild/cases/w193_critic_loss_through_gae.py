"""An actor-critic's value loss taken as the squared GAE advantages with their gradient intact: the
critic is pulled through the bootstrapped next-state values as well as its own prediction, so it
minimises the Bellman residual of a random environment instead of regressing on fixed targets, and it
settles on biased values -- with no error and a falling loss.

Source: Farama-Foundation/Gymnasium#1494 (https://github.com/Farama-Foundation/Gymnasium/issues/1494),
"[Bug Report] Incorrect A2C implementation": "The critical bug is that you use advantages as the critic
target without detaching it, so the critic loss backpropagates through the GAE computation itself
(i.e., through value_preds[t] and value_preds[t+1] inside td_error and the recursion) ... This is not
the intended value-function regression (you want to regress V to a fixed target)" (labels: bug).
Here the critic of the tutorial's ``get_losses`` (GAE over 16-step rollouts of 32 environments) learns
the values of a nine-state random walk whose right end pays 1.  The buggy critic loss is
``advantages.pow(2).mean()``, the twin regresses the values on ``(advantages + value_preds[:-1]).detach()``.

Metric: RMSE of the learned values against the true discounted values of the seven inner states (plain
``python``, CPU, seed 0; lower is better): bug 0.0888, twin 0.0208
"""

REPORT = "N167"
MECHANISM = "critic-target-not-detached"
SLUGS = ()
METRIC = ("value_rmse", 0.0888, 0.0208)

_SCRIPT = '''
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, GAMMA, LAM, T, ENVS = 9, 0.95, 0.95, 16, 32  # a random walk over 9 states, both ends terminal


def step(state):
    """Left or right at random; +1 on reaching the right end, 0 elsewhere; episodes restart mid-chain."""
    nxt = state + torch.where(torch.rand(state.shape, generator=g) < 0.5, -1, 1)
    done = (nxt == 0) | (nxt == N - 1)
    reward = (nxt == N - 1).float()
    return torch.where(done, torch.full_like(nxt, N // 2), nxt), reward, done


critic = nn.Linear(N, 1)
model = critic
opt = torch.optim.Adam(critic.parameters(), lr=1e-2)


def value(states):
    return critic(nn.functional.one_hot(states, N).float()).squeeze(-1)


state = torch.full((ENVS,), N // 2)
#@guard
for update in range(400):
    states, rewards, masks = [], [], []
    for t in range(T + 1):
        states.append(state)
        state, r, done = step(state)
        rewards.append(r)
        masks.append((~done).float())
    value_preds = value(torch.stack(states))  # (T + 1, ENVS), with gradients
    advantages = torch.zeros(T, ENVS)
    gae = torch.zeros(ENVS)
    for t in reversed(range(T)):
        td_error = rewards[t] + GAMMA * masks[t] * value_preds[t + 1] - value_preds[t]
        gae = td_error + GAMMA * LAM * masks[t] * gae
        advantages[t] = gae
    critic_loss = __CRITIC_LOSS__
    opt.zero_grad()
    critic_loss.backward()
    opt.step()

# true values: probability of ending at the right end, discounted, by dynamic programming
true = torch.zeros(N)
for _ in range(2000):
    new = torch.zeros(N)
    for s in range(1, N - 1):
        for nxt in (s - 1, s + 1):
            r = 1.0 if nxt == N - 1 else 0.0
            new[s] += 0.5 * (r + (0.0 if nxt in (0, N - 1) else GAMMA * true[nxt]))
    true = new
with torch.no_grad():
    inner = torch.arange(1, N - 1)
    rmse = ((value(inner) - true[inner]) ** 2).mean().sqrt().item()
print(f"METRIC {rmse:.4f}")
'''


_TWIN = "((advantages + value_preds[:-1]).detach() - value_preds[:-1]).pow(2).mean()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CRITIC_LOSS__", "advantages.pow(2).mean()" if bug else _TWIN)
