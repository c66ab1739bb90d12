"""A normalizing flow whose ``forward_and_log_det`` subtracts the layers' log-determinants where the sampling direction
adds them: trained on its own samples by reverse KL, the flow sees its entropy term with the wrong sign, is
rewarded for shrinking its volume and collapses onto a point instead of spreading over the target's modes -- with no
error.

Source: VincentStimper/normalizing-flows#27 (https://github.com/VincentStimper/normalizing-flows/issues/27), "Issue
while computing the ``flow.forward`` function": "I was wondering why there was a minus here ... when computing the
forward log jacobian ? Shouldn't it be a plus ?" (labels: bug; fixed by #28, "Fixed sign of log det of
``forward_and_log_det`` method", merged). Here eight affine coupling layers and a scale are trained by reverse KL to
a mixture of four Gaussians in 2-D (256 samples a step, 600 steps); the bug accumulates ``log_det -= ld``, the twin
``+=``. normflows' classes are replaced by the small flow written here.

Metric: reverse KL divergence to the target estimated with the correct log-determinant on 4000 samples, lower is
better (plain ``python``, CPU, seed 0): bug 10.0108, twin 0.6670
"""

REPORT = "N275"
MECHANISM = "flow-log-det-sign-flipped"
SLUGS = ()
METRIC = ("reverse_kl", 10.0108, 0.6670)

_SCRIPT = '''import math
import torch
from torch import nn

torch.manual_seed(0)
means = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def target_log_prob(x):
    d = -((x[:, None, :] - means[None]) ** 2).sum(-1) / (2 * 0.5 ** 2)
    return torch.logsumexp(d, 1) - math.log(4) - math.log(2 * math.pi * 0.25)


class AffineCoupling(nn.Module):
    def __init__(self, flip):
        super().__init__()
        self.flip = flip
        self.net = nn.Sequential(nn.Linear(1, 32), nn.Tanh(), nn.Linear(32, 2))

    def forward(self, z):
        a, b = (z[:, 1:], z[:, :1]) if self.flip else (z[:, :1], z[:, 1:])
        s, t = self.net(a).chunk(2, 1)
        s = torch.tanh(s)
        b = b * s.exp() + t
        out = torch.cat([b, a], 1) if self.flip else torch.cat([a, b], 1)
        return out, s.sum(1)


class Flow(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList(AffineCoupling(i % 2 == 1) for i in range(8))
        self.scale = nn.Parameter(torch.zeros(2))

    def forward_and_log_det(self, z):
        log_det = torch.zeros(len(z))
        for layer in self.layers:
            z, ld = layer(z)
            log_det __OP__ ld
        z = z * self.scale.exp()
        log_det __OP__ self.scale.sum()
        return z, log_det

    def sample(self, n):
        z = torch.randn(n, 2)
        x, log_det = self.forward_and_log_det(z)
        log_q = -0.5 * (z ** 2).sum(1) - math.log(2 * math.pi) - log_det
        return x, log_q


model = Flow()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    x, log_q = model.sample(256)
    loss = (log_q - target_log_prob(x)).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    z = torch.randn(4000, 2)
    x = z
    log_det = torch.zeros(len(z))
    for layer in model.layers:
        x, ld = layer(x)
        log_det += ld
    x = x * model.scale.exp()
    log_det += model.scale.sum()
    log_q = -0.5 * (z ** 2).sum(1) - math.log(2 * math.pi) - log_det
    kl = (log_q - target_log_prob(x)).mean().item()
print(f"METRIC {kl:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__OP__', '-=' if bug else '+=')
