"""A categorical (C51) projection that splits each shifted atom's probability between its floor ``l`` and ceiling
``u`` in proportion to ``u - b`` and ``b - l``: where the shifted atom lands exactly on the support (``b`` an
integer), ``l == u`` and both weights are 0, so that atom's probability is lost and the target does not sum to 1 --
nothing fails, and where every atom lands on the support the targets are all zero and the critic learns nothing.

Source: floringogianu/categorical-dqn#1 (https://github.com/floringogianu/categorical-dqn/issues/1): "when \"b\"
happens to be an integer ... the floor and ceil indexes, \"l\" and \"u\" will be equal ... the category \"b\"
will be projected to nowhere"; maintainer: "thank you for spotting this issue" (fixed by #2, merged). The twin
uses the usual correction (Kaixhin's Rainbow has it): ``l`` moves down where ``l == u``, then ``u`` up where they are
still equal. Here a chain of 12 states where the fixed
policy earns 1 per step until the end, a return distribution over the atoms 0..12 with discount 1 (so every shifted
atom is an integer, the case the report describes), learned by an MLP from its projected target; the bug projects
as the repository did, the twin with #2's correction. The reproduction evaluates a fixed policy on a chain instead
of training a DQN on Atari.

Metric: mean probability the critic puts on each state's true return (plain ``python``, CPU, seed 0): bug 0.0781,
twin 0.9987
"""

REPORT = "N369"
MECHANISM = "projection-drops-mass-on-integer-atoms"
SLUGS = ()
METRIC = ('true_return_probability', 0.0781, 0.9987)

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
    move = ('' if bug
            else '    l = torch.where((u > 0) & (l == u), l - 1, l)\n'
                 '    u = torch.where((l < ATOMS - 1) & (l == u), u + 1, u)\n')
    return _SCRIPT.replace('__MOVE__', move)
