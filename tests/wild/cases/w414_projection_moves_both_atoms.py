"""A categorical (C51-style) critic whose projection, where a shifted atom lands exactly on the support (``l == u``),
computes both corrections from the original ``l`` and ``u`` and so moves ``l`` down and ``u`` up together: the two
neighbours then get weights that sum to 2, the targets are not distributions, and the critic learns the wrong return
distribution -- nothing fails.

Source: younggyoseo/FastTD3#29 (https://github.com/younggyoseo/FastTD3/issues/29): with both masks computed before
either index is moved, "some projected categorical distributions don't sum to 1 but something larger"; fixed by #30
(merged: "Looks good to me, thanks!"), which moves ``l`` first and then tests ``u`` against the moved ``l``. Here a
chain of 12 states where the fixed policy earns 1 per step until the end, a return distribution over the atoms
0..12 (so every shifted atom is an integer), learned by an MLP from its projected target; the bug computes both masks
first, the twin moves ``l`` and then ``u`` against the moved ``l``. The reproduction evaluates a fixed policy with
discount 1 instead of training an actor with a twin critic.

Metric: mean probability the critic puts on each state's true return (plain ``python``, CPU, seed 0): bug 0.1780,
twin 0.9987
"""

REPORT = "N388"
MECHANISM = "projection-shifts-both-neighbours"
SLUGS = ()
METRIC = ('true_return_probability', 0.178, 0.9987)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
# a chain of 12 states; moving right pays +1 per step until the end (terminal); the critic learns the return
# distribution of the fixed policy "always right" over atoms 0..12 (v_min 0, v_max 12, delta_z 1)
N, ATOMS, V_MIN, V_MAX, GAMMA = 12, 13, 0.0, 12.0, 1.0
support = torch.linspace(V_MIN, V_MAX, ATOMS)
delta_z = (V_MAX - V_MIN) / (ATOMS - 1)
true_return = torch.arange(N, 0, -1).float()       # state s earns N - s more rewards


def projection(next_probs, rewards, dones):
    target_z = (rewards[:, None] + GAMMA * (1 - dones[:, None]) * support[None]).clamp(V_MIN, V_MAX)
    b = (target_z - V_MIN) / delta_z
    l, u = b.floor().long(), b.ceil().long()
__MOVE__    proj = torch.zeros(len(rewards), ATOMS)
    proj.scatter_add_(1, l, next_probs * (u.float() - b))
    proj.scatter_add_(1, u, next_probs * (b - l.float()))
    return proj


model = nn.Sequential(nn.Linear(N, 64), nn.ReLU(), nn.Linear(64, ATOMS))
target = nn.Sequential(nn.Linear(N, 64), nn.ReLU(), nn.Linear(64, ATOMS))
target.load_state_dict(model.state_dict())
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
eye = torch.eye(N + 1)[:, :N]
#@guard
for step in range(1500):
    s = torch.randint(0, N, (32,))
    s2 = s + 1
    r = torch.ones(32)
    d = (s2 == N).float()
    with torch.no_grad():
        next_probs = F.softmax(target(eye[s2]), 1)
        tgt = projection(next_probs, r, d)
    loss = -(tgt * F.log_softmax(model(eye[s]), 1)).sum(1).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 50 == 0:
        target.load_state_dict(model.state_dict())
with torch.no_grad():
    probs = F.softmax(model(eye[:N]), 1)
atom = true_return.long()
print(f"METRIC {probs[torch.arange(N), atom].mean().item():.4f}")
'''


def script(bug: bool) -> str:
    move = ('    l_mask = (u > 0) & (l == u)\n'
            '    u_mask = (l < ATOMS - 1) & (l == u)\n'
            '    l = torch.where(l_mask, l - 1, l)\n'
            '    u = torch.where(u_mask, u + 1, u)\n' if bug
            else '    l = torch.where((u > 0) & (l == u), l - 1, l)\n'
                 '    u = torch.where((l < ATOMS - 1) & (l == u), u + 1, u)\n')
    return _SCRIPT.replace('__MOVE__', move)
