"""A Gaussian sample layer that passes the encoder's log-variance through ``softplus``: the log-variance can only be
positive, so the posterior's standard deviation never drops below 1, every latent code is drowned in unit noise, and
the VAE reconstructs worse and pays a larger KL -- nothing fails.

Source: wohlert/semi-supervised-pytorch#16 (https://github.com/wohlert/semi-supervised-pytorch/issues/16): the
``GaussianSample`` layer applies ``softplus`` to the log-variance; maintainer: "You are correct, this is a mistake"
(fixed by #23: "it leads to log_var being positive only"). Here a VAE on the digits (encoder 64 -> 128, an 8-dimensional
latent, decoder 8 -> 128 -> 64, Bernoulli likelihood on the grey levels), trained 1500 steps by Adam; the bug's sample
layer computes ``log_var = softplus(linear(h))``, the twin's ``log_var = linear(h)``. The reproduction is the
unsupervised VAE of the repository's models, not its semi-supervised variants.

Metric: negative ELBO per digit on 497 held-out digits, one latent sample each (plain ``python``, CPU, seed 0; lower is
better; the script also prints the reconstruction term, 23.29 and 21.17): bug 25.7921, twin 24.3531
"""

REPORT = "N377"
MECHANISM = "log-variance-through-softplus"
SLUGS = ()
METRIC = ('test_neg_elbo', 25.7921, 24.3531)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, _ = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
perm = torch.randperm(len(X))
tr, te = X[perm[:1300]], X[perm[1300:]]


class GaussianSample(nn.Module):
    def __init__(self, d_in, d_z):
        super().__init__()
        self.mu, self.log_var = nn.Linear(d_in, d_z), nn.Linear(d_in, d_z)

    def forward(self, h):
        mu = self.mu(h)
__LOGVAR__        z = mu + torch.exp(0.5 * log_var) * torch.randn_like(mu)
        return z, mu, log_var


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU())
        self.sample = GaussianSample(128, 8)
        self.dec = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x):
        z, mu, log_var = self.sample(self.enc(x))
        return self.dec(z), mu, log_var


def neg_elbo(x):
    logits, mu, log_var = model(x)
    rec = F.binary_cross_entropy_with_logits(logits, x, reduction='none').sum(1)
    kl = -0.5 * (1 + log_var - mu ** 2 - log_var.exp()).sum(1)
    return (rec + kl).mean()


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(1500):
    x = tr[torch.randint(0, len(tr), (64,))]
    loss = neg_elbo(x)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.manual_seed(1)
with torch.no_grad():
    logits, mu, log_var = model(te)
    rec = F.binary_cross_entropy_with_logits(logits, te, reduction="none").sum(1).mean()
    print(f"REC {rec.item():.4f}")
    print(f"METRIC {neg_elbo(te).item():.4f}")
'''


def script(bug: bool) -> str:
    log_var = ('        log_var = F.softplus(self.log_var(h))\n' if bug
               else '        log_var = self.log_var(h)\n')
    return _SCRIPT.replace('__LOGVAR__', log_var)
