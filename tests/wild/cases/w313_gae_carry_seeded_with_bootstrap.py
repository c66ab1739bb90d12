"""GAE's backward recursion with its carry started at the window's bootstrap value ``V(s_T)`` while ``V(s_T)`` is also
used in the last TD error: the bootstrap is counted twice, every advantage in the window is inflated by
``(gamma * lambda)^(T - t) * V(s_T)``, and a value function regressed on those returns chases its own bias -- with
no error.

Source: simonsays1980/rl-triton#4 (https://github.com/simonsays1980/rl-triton/pull/4), "fix: stop double-counting
the window bootstrap in GAE and V-Trace": "GAE's backward scan seeded the additive boundary carry ``A[T]`` with the
window bootstrap ``V(s_T)``, in addition to using it inside ``delta[T-1]`` as the next-state value --
double-counting it by exactly ``(gamma*lambda)^(T-t) * V(s_T)``" (merged). Here a tabular value function of a
random 10-state Markov reward process is fitted with Adam to GAE returns over windows of 16 steps from 64
continuing environments (gamma 0.95, lambda 0.9); the bug starts the carry at the bootstrap, the twin at zero.
rl-triton's Triton kernels are replaced by a Python loop.

Metric: root mean squared error of the fitted values against the exact ``(I - gamma P)^-1 r``, lower is better
(plain ``python``, CPU, seed 0): bug 128.4481, twin 0.1403
"""

REPORT = "N287"
MECHANISM = "gae-carry-seeded-with-bootstrap"
SLUGS = ()
METRIC = ("value_rmse", 128.4481, 0.1403)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
S, T, GAMMA, LAM, ENVS = 10, 16, 0.95, 0.9, 64
P = torch.softmax(3 * torch.randn(S, S), 1)
r = torch.randn(S)
v_true = torch.linalg.solve(torch.eye(S) - GAMMA * P, r)


def rollout(s0):
    states = [s0]
    for _ in range(T):
        states.append(torch.multinomial(P[states[-1]], 1).squeeze(1))
    return torch.stack(states, 1)


def gae(rewards, values, bootstrap):
    T_ = rewards.shape[1]
    adv = torch.zeros_like(rewards)
    carry = __SEED__
    for t in reversed(range(T_)):
        next_v = bootstrap if t == T_ - 1 else values[:, t + 1]
        delta = rewards[:, t] + GAMMA * next_v - values[:, t]
        carry = delta + GAMMA * LAM * carry
        adv[:, t] = carry
    return adv


model = nn.Embedding(S, 1)
nn.init.zeros_(model.weight)
opt = torch.optim.Adam(model.parameters(), lr=0.3)
#@guard
s = torch.randint(0, S, (ENVS,))
for it in range(400):
    states = rollout(s)
    s = states[:, -1]
    with torch.no_grad():
        values = model(states).squeeze(-1)
        adv = gae(r[states[:, :-1]], values[:, :-1], values[:, -1])
        returns = adv + values[:, :-1]
    loss = ((model(states[:, :-1]).squeeze(-1) - returns) ** 2).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
err = ((model.weight.squeeze(1) - v_true) ** 2).mean().sqrt().item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SEED__', 'bootstrap' if bug else 'torch.zeros(ENVS)')
