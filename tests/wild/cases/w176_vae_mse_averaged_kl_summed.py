"""A VAE whose reconstruction term is averaged over every pixel of the batch while its KL term is
summed: the reconstruction weighs a few hundredths of what it should next to the KL, the encoder is
pushed to the prior, every digit decodes to about the same blur and the reconstructions stop
improving -- with no error and a loss that falls.

Source: orybkin/sigma-vae-pytorch#12 (https://github.com/orybkin/sigma-vae-pytorch/pull/12), "fix: mse_vae
training broken due to incorrect averaging": "When training, the model generates blurry images and is
unable to improve. Setting MSELoss size_average to False fixes the issue"; maintainer: "Ah that's
definitely wrong! size_average is incorrect because bigger images have more information so they should
have a larger MSE loss".  Here a small VAE (8 latent dimensions) learns the digits (pixels standardised
on the training set); the loss is the reconstruction term plus the summed KL, divided by the batch size.
The buggy reconstruction term is ``F.mse_loss(recon, x)``, the twin's
``F.mse_loss(recon, x, reduction="sum")``.

Metric: validation reconstruction MSE from the posterior means (plain ``python``, CPU, seed 0; lower
is better): bug 0.7977, twin 0.2569
"""

REPORT = "N150"
MECHANISM = "reconstruction-averaged-kl-summed"
SLUGS = ()
METRIC = ("val_recon_mse", 0.7977, 0.2569)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32)
x_train, x_val = X[:1400], X[1400:]
mean, std = x_train.mean(0), x_train.std(0) + 1e-3
x_train, x_val = (x_train - mean) / std, (x_val - mean) / std  # standardised pixels


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
        self.dec = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    for i in range(0, 1400, 64):
        x = x_train[i:i + 64]
        recon, mu, logvar = model(x)
        rec = __REC__
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
        loss = (rec + kl) / len(x)
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
with torch.no_grad():
    mu, _ = model.enc(x_val).chunk(2, dim=1)
    mse = F.mse_loss(model.dec(mu), x_val).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__REC__", "F.mse_loss(recon, x)" if bug else 'F.mse_loss(recon, x, reduction="sum")')
