"""A squashed Gaussian policy that applies ``tanh`` to the mean in its forward and again when it squashes the
action into the action space: the mean action is ``tanh(tanh(mu))``, at most about 0.76 in magnitude, so actions
near the bounds are out of the policy's reach and the agent settles short of them -- with no error.

Source: cpnota/autonomous-learning-library#154 (https://github.com/cpnota/autonomous-learning-library/issues/154),
"GaussianPolicy uses tanh two times": "can you explain to me why tanh is used here: [the forward] and in
_sqash?"; maintainer: "Looks like a bug 😅 Thanks for the report! I'll open a PR with a fix." (labels: bug; fixed
by #155, "fix gaussian policy double squashing", merged). Here a one-step continuous-control task (a contextual
bandit: the state is eight numbers, the best action a fixed function of it in [-0.98, 0.98], the reward minus the
squared distance to it) is learnt by a policy whose sampled actions are ``tanh`` of a Gaussian and whose loss is
the reparameterised negative reward, as in the library's soft actor-critic; the bug also puts ``tanh`` on the
mean in the forward, the twin does not. The metric is the squared error of the deterministic (mean) action on
held-out states. The reproduction replaces the environments and the critic by the known reward.

Metric: test squared action error (plain ``python``, CPU, seed 0): bug 0.0429, twin 0.0043 (lower is better)
"""

REPORT = "N315"
MECHANISM = "policy-mean-squashed-twice"
SLUGS = ()
METRIC = ("test_action_error", 0.0429, 0.0043)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
S = 8
w_true = torch.randn(S)


def best_action(s):
    return 0.98 * torch.sign(s @ w_true) * (s @ w_true).abs().clamp(max=1.0) ** 0.25


class GaussianPolicy(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(S, 64), nn.ReLU(), nn.Linear(64, 2))

    def forward(self, s):
        out = self.body(s)
        mean = __MEAN__
        return mean, out[:, 1].clamp(-5, 1).exp()

    def squash(self, x):
        return torch.tanh(x)


model = GaussianPolicy()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(1000):
    s = torch.randn(128, S)
    mean, std = model(s)
    action = model.squash(mean + std * torch.randn_like(mean))
    reward = -(action - best_action(s)) ** 2
    loss = -reward.mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    s = torch.randn(2000, S)
    mean, _ = model(s)
    err = ((model.squash(mean) - best_action(s)) ** 2).mean().item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__MEAN__', "torch.tanh(out[:, 0])" if bug else "out[:, 0]")
