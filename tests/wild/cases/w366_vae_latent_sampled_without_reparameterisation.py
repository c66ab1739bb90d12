"""A VAE that draws its latent code with ``.sample()`` instead of ``.rsample()``: ``sample`` runs under ``no_grad``, so
the reconstruction term sends no gradient to the encoder, only the KL term trains it, and the posterior collapses
onto the prior -- the decoder learns the average digit and the loss still falls.

Source: pyro-ppl/pyro#1896 (https://github.com/pyro-ppl/pyro/pull/1896), merged, fixing #1852: the plain-PyTorch VAE of
Pyro's VAE comparison example sampled its latent variable with ``.sample()``, which gives no reparameterised gradient;
the fix samples with ``.rsample()``. Here the same kind of VAE (an MLP encoder giving a diagonal Normal over 8 latents,
a Bernoulli-logit MLP decoder, the negative ELBO as loss) trains on digits for 30 epochs; the bug samples
``q.sample()``, the twin ``q.rsample()``. The reproduction replaces MNIST by digits, and measures reconstructions
decoded from the posterior mean.

Metric: MSE of the test digits' reconstructions from the posterior mean (plain ``python``, CPU, seed 0; lower is
better): bug 0.0751, twin 0.0339
"""

REPORT = "N340"
MECHANISM = "latent-sampled-without-reparameterisation"
SLUGS = ()
METRIC = ('test_reconstruction_mse', 0.0751, 0.0339)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, _ = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.
perm = torch.randperm(len(X))
train, test = X[perm[:1400]], X[perm[1400:]]


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
        self.dec = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x):
        mu, log_sigma = self.enc(x).chunk(2, -1)
        q = torch.distributions.Normal(mu, log_sigma.exp())
        z = __SAMPLE__
        p = torch.distributions.Normal(torch.zeros_like(mu), torch.ones_like(mu))
        kl = torch.distributions.kl_divergence(q, p).sum(-1)
        recon = F.binary_cross_entropy_with_logits(self.dec(z), x, reduction="none").sum(-1)
        return recon, kl


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    p = torch.randperm(len(train))
    for i in range(0, len(p), 64):
        recon, kl = model(train[p[i:i + 64]])
        loss = (recon + kl).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mu, _ = model.enc(test).chunk(2, -1)
    mse = F.mse_loss(torch.sigmoid(model.dec(mu)), test).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SAMPLE__', 'q.sample()' if bug
                           else 'q.rsample()')
