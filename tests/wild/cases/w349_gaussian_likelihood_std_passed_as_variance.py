"""A Gaussian likelihood head that predicts a standard deviation and passes it to ``GaussianNLLLoss``, whose third
argument is the variance: training then fits the "standard deviation" output to the variance, so the forecast's
uncertainty is too narrow wherever the noise is below one and too wide wherever it is above -- with no error.

Source: unit8co/darts#1162 (https://github.com/unit8co/darts/pull/1162), "Feat/beta nll": "Corrects a bug in
`GaussianLikelihood`, where we were using the standard dev instead of the variance" (the maintainer's PR,
merged). Here a small network forecasts the next value of noisy sine waves whose noise level varies from wave to
wave (standard deviation 0.1 to 2), with a mean and a softplus standard-deviation output; the bug passes the
standard deviation to ``F.gaussian_nll_loss``, the twin its square. The metric is the Gaussian negative
log-likelihood of held-out waves under the predicted mean and standard deviation (computed with
``torch.distributions.Normal``). The reproduction replaces darts' forecasting models by the small network.

Metric: test Gaussian NLL per point (plain ``python``, CPU, seed 0): bug 1.9643, twin 1.4627 (lower is
better)
"""

REPORT = "N323"
MECHANISM = "likelihood-std-passed-as-variance"
SLUGS = ()
METRIC = ("test_gaussian_nll", 1.9643, 1.4627)

_SCRIPT = '''import math

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
W = 16


def make(n):
    phase = torch.rand(n, 1) * 2 * math.pi
    freq = 0.2 + 0.3 * torch.rand(n, 1)
    noise = 0.1 + 1.9 * torch.rand(n, 1)
    t = torch.arange(W + 1).float()
    clean = 3 * torch.sin(freq * t + phase)
    series = clean + noise * torch.randn(n, W + 1)
    return torch.cat([series[:, :W], noise], 1), series[:, W]


Xtr, ytr = make(4000)
Xte, yte = make(1000)


class GaussianHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(W + 1, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.mu = nn.Linear(64, 1)
        self.sigma = nn.Linear(64, 1)

    def forward(self, x):
        h = self.body(x)
        return self.mu(h).squeeze(1), F.softplus(self.sigma(h)).squeeze(1) + 1e-3


model = GaussianHead()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(20):
    for i in torch.randperm(len(Xtr)).split(128):
        mu, sigma = model(Xtr[i])
        loss = F.gaussian_nll_loss(mu, ytr[i], __VAR__)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mu, sigma = model(Xte)
    nll = -torch.distributions.Normal(mu, sigma).log_prob(yte).mean().item()
print(f"METRIC {nll:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__VAR__', "sigma" if bug else "sigma ** 2")
