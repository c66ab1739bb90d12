"""A stochastic variational GP whose ELBO adds a minibatch's expected log-likelihood to the full KL term without
rescaling the likelihood by ``N / batch_size``: the KL term, which belongs to the whole data set once, is then
weighted as if the data set were one batch, the posterior is held near its prior, and the model underfits -- the
ELBO still rises and nothing fails.

Source: tachukao/mgplvm-pytorch#19 (https://github.com/tachukao/mgplvm-pytorch/pull/19), "Fixed bug in elbo of svgp
when batching": "we fixed a nasty error in `svgp` when we're batching ... Instead of computing, ``elbo = m / n_batch
* p(batch | g) - KL(q(g) || p(g))`` we were computing ``elbo = p(batch | g) - KL(q(g) || p(g))``" (merged). Here a
sparse variational GP (RBF kernel, 24 learned inducing points, whitened Gaussian q(u)) regresses a 1-D function
from 4000 noisy points in minibatches of 64; the twin scales the batch likelihood by ``N_TRAIN / len(idx)``, the bug
does not. The reproduction departs from the report in the model (a plain SVGP regression, not the repository's
GPLVM over neural recordings), written without a GP library.

Metric: test RMSE of the predictive mean (lower is better; the noise is 0.1; plain ``python``, CPU, seed 0):
bug 0.3605, twin 0.1082
"""

REPORT = "N433"
MECHANISM = "minibatch-likelihood-not-rescaled-to-dataset"
SLUGS = ()
METRIC = ("test_rmse", 0.3605, 0.1082)

_SCRIPT = '''
import math
import torch
from torch import nn

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
N_TRAIN, BATCH, M = 4000, 64, 24


def target(x):
    return torch.sin(2 * x) + 0.5 * torch.sin(7 * x)


x_train = torch.rand(N_TRAIN, 1, generator=g) * 6 - 3
y_train = target(x_train).squeeze(1) + 0.1 * torch.randn(N_TRAIN, generator=g)
x_test = torch.linspace(-3, 3, 500)[:, None]
y_test = target(x_test).squeeze(1) + 0.1 * torch.randn(500, generator=g)


class SVGP(nn.Module):
    """Sparse variational GP regression with a whitened inducing-point posterior q(v) = N(m, L L^T)."""

    def __init__(self):
        super().__init__()
        self.z = nn.Parameter(torch.linspace(-3, 3, M)[:, None])
        self.log_ls = nn.Parameter(torch.tensor(-1.0))
        self.log_var = nn.Parameter(torch.tensor(0.0))
        self.log_noise = nn.Parameter(torch.tensor(-1.0))
        self.m = nn.Parameter(torch.zeros(M))
        self.l_raw = nn.Parameter(torch.eye(M) * 0.5)

    def kern(self, a, b):
        d2 = (a[:, None, :] - b[None, :, :]).pow(2).sum(-1)
        return self.log_var.exp() * torch.exp(-0.5 * d2 / self.log_ls.exp() ** 2)

    def q_chol(self):
        return torch.tril(self.l_raw, -1) + torch.diag(torch.nn.functional.softplus(torch.diagonal(self.l_raw)))

    def predict(self, x):
        kzz = self.kern(self.z, self.z) + 1e-4 * torch.eye(M)
        lz = torch.linalg.cholesky(kzz)
        a = torch.linalg.solve_triangular(lz, self.kern(self.z, x), upper=False).T
        mean = a @ self.m
        var = self.log_var.exp() - a.pow(2).sum(1) + (a @ self.q_chol()).pow(2).sum(1)
        return mean, var.clamp_min(1e-6)

    def kl(self):
        lq = self.q_chol()
        return 0.5 * (lq.pow(2).sum() + self.m.pow(2).sum() - M - 2 * torch.log(torch.diagonal(lq)).sum())

    def expected_log_lik(self, x, y):
        mean, var = self.predict(x)
        noise = self.log_noise.exp()
        return (-0.5 * math.log(2 * math.pi) - 0.5 * self.log_noise - 0.5 * ((y - mean) ** 2 + var) / noise).sum()


model = SVGP()
opt = torch.optim.Adam(model.parameters(), lr=0.03)
#@guard
for epoch in range(15):
    perm = torch.randperm(N_TRAIN)
    for i in range(0, N_TRAIN, BATCH):
        idx = perm[i:i + BATCH]
        elbo = __ELBO__
        loss = -elbo / N_TRAIN
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mean, var = model.predict(x_test)
    rmse = (mean - y_test).pow(2).mean().sqrt().item()
print(f"METRIC {rmse:.4f}")
'''

_BUG = "model.expected_log_lik(x_train[idx], y_train[idx]) - model.kl()"
_FIX = "N_TRAIN / len(idx) * model.expected_log_lik(x_train[idx], y_train[idx]) - model.kl()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ELBO__", _BUG if bug else _FIX)
