"""A vector-quantiser whose codebook loss is computed on the straight-through output: ``z_q = z_e + (z -
z_e).detach()`` carries gradients to the encoder only, so ``mse(z_q, z_e.detach())`` never reaches the
codebook, the codewords stay where they were initialised, and the reconstructions are limited by a codebook
that is never learned -- while the loss still goes down, with no error.

Source: showlab/Olaf-World#8 (https://github.com/showlab/Olaf-World/issues/8), "VQLAM: codebook never receives
gradients (codebook loss uses the straight-through output)": "`z_q = x + (z - x).detach()` is the
straight-through output ... the codebook loss is computed on it: `codebook_loss = F.mse_loss(z_q,
z_e.detach())`. Because the codebook lookup `z` only appears inside `.detach()`, this term has no gradient
path to `vq.codebook.weight`, and the codebook stays at its initialization. `random_restart()` is not called
for this quantizer either ... The reconstruction loss still goes down, which makes this easy to miss."  Here a
VQ autoencoder (a latent of four 4-d vectors per image, 32 codewords initialised uniformly in ``(-1/K,
1/K)``) reconstructs scikit-learn's digits.  The buggy codebook loss is ``F.mse_loss(z_q, z_e.detach())``, the
twin's ``F.mse_loss(z, z_e.detach())``.

Metric: test reconstruction MSE (plain ``python``, CPU, seed 0): bug 0.0736, twin 0.0199 (lower is better)
"""

REPORT = "N190"
MECHANISM = "codebook-loss-on-straight-through-output"
SLUGS = ()
METRIC = ("test_recon_mse", 0.0736, 0.0199)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Xtr, Xte = X[:1400], X[1400:]
K, E, L = 32, 4, 4  # codewords, code size, latent vectors per image


class VQAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, L * E))
        self.dec = nn.Sequential(nn.Linear(L * E, 128), nn.ReLU(), nn.Linear(128, 64))
        self.codebook = nn.Embedding(K, E)
        self.codebook.weight.data.uniform_(-1 / K, 1 / K)

    def forward(self, x):
        z_e = self.enc(x).view(-1, E)
        z = self.codebook(torch.cdist(z_e, self.codebook.weight).argmin(1))
        z_q = z_e + (z - z_e).detach()
        __CODEBOOK__
        commitment_loss = F.mse_loss(z_e, z.detach())
        return self.dec(z_q.view(-1, L * E)), codebook_loss + 0.25 * commitment_loss


model = VQAE()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(60):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 100):
        b = Xtr[perm[i:i + 100]]
        recon, vq_loss = model(b)
        loss = F.mse_loss(recon, b) + vq_loss
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    mse = F.mse_loss(model(Xte)[0], Xte)
print(f"METRIC {mse.item():.4f}")
'''


def script(bug: bool) -> str:
    line = "codebook_loss = F.mse_loss(z_q, z_e.detach())" if bug else "codebook_loss = F.mse_loss(z, z_e.detach())"
    return _SCRIPT.replace("__CODEBOOK__", line)
