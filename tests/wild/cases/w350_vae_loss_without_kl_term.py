"""A VAE trained on the reconstruction loss alone, its KL term lost from the loss: the encoder's posteriors drift
away from the prior without penalty, so the model is an autoencoder with noise, its evidence lower bound is poor
and decoding samples of the prior gives no digits -- with no error.

Source: facebookresearch/irmae#1 (https://github.com/facebookresearch/irmae/issues/1), "beta=0.1 used for
reference VAE": a commenter: "I can not find the KL term, which I had expected to see close to the line 245 in
models.py ``if self.vae: loss = F.binary_cross_entropy(x_hat, x)`` ... Did you remove the regularization in the
end?"; maintainer: "thanks for pointing this out. It's a mistake in our last update. Here's what it should look
like: ... ``loss -= self.args.beta * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())``". Here a small VAE
(8 latent dimensions) is trained on digits scaled to [0, 1] with the repository's loss and beta 0.1; the bug
leaves the KL term out, the twin has it. The metric is the held-out digits' negative evidence lower bound (the
summed binary cross-entropy over the 64 pixels plus the full KL to the prior), the usual measure of a VAE. The
reproduction replaces the repository's image models and data by an MLP on digits.

Metric: test negative ELBO in nats per digit (plain ``python``, CPU, seed 0): bug 112.6916, twin 25.5976 (lower is
better)
"""

REPORT = "N324"
MECHANISM = "vae-loss-missing-kl-term"
SLUGS = ()
METRIC = ("test_negative_elbo", 112.6916, 25.5976)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, _ = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16
X = X[torch.randperm(len(X))]
Xtr, Xte = X[:1400], X[1400:]
BETA = 0.1


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
        self.dec = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 64), nn.Sigmoid())

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    for i in torch.randperm(len(Xtr)).split(64):
        x = Xtr[i]
        x_hat, mu, logvar = model(x)
        loss = F.binary_cross_entropy(x_hat, x)
__KL__
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    x_hat, mu, logvar = model(Xte)
    rec = F.binary_cross_entropy(x_hat, Xte, reduction="none").sum(1)
    kl = -0.5 * (1 + logvar - mu.pow(2) - logvar.exp()).sum(1)
    nelbo = (rec + kl).mean().item()
print(f"METRIC {nelbo:.4f}")
'''

_KL = "        loss -= BETA * torch.mean(1 + logvar - mu.pow(2) - logvar.exp())"


def script(bug: bool) -> str:
    return _SCRIPT.replace('__KL__\n', "" if bug else _KL + "\n")
