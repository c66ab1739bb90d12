"""A KL term summed over the whole tensor (``torch.sum`` without ``dim``) and then multiplied by the per-event mask:
every event of the batch carries the KL of all events, the KL weight grows with the batch's event count, the posterior
collapses onto the prior and the decoder ignores the latent code -- with no error.

Source: EDAPINENUT/GNTPP#4 (https://github.com/EDAPINENUT/GNTPP/issues/4), "Coding error in
GNTPP/models/prob_decoders/vae_modules /vae.py": "``kl_loss = (- 0.5 * torch.sum(1 + log_var - mean.pow(2) -
log_var.exp())) * seq_onehots`` ... the "dim" parameter is passed to torch.sum() ... summing over the whole tensor
... yielding a scalar! No exception is raised, because multiplying this scalar to the onehot mask is still valid";
maintainer: "The bug is fixed, and the new experimental results will be updated in the Arxiv version". Here a
per-event VAE (8 latent dimensions, Gaussian reconstruction with sigma 0.15) encodes padded sequences of 2-10
digits, 16 sequences a batch, the loss being summed over valid events and divided by their count; the bug sums the
KL over the whole tensor, the twin over ``dim=-1``. GNTPP's temporal point-process decoder is replaced by the digit
reconstruction.

Metric: test reconstruction error from the posterior mean (sum of squares per digit), lower is better (plain
``python``, CPU, seed 0): bug 4.7132, twin 1.1242
"""

REPORT = "N269"
MECHANISM = "kl-summed-over-batch-then-masked"
SLUGS = ()
METRIC = ("test_recon_error", 4.7132, 1.1242)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
perm = torch.randperm(len(X))
tr, te = X[perm[:1400]], X[perm[1400:]]
B, L, Z = 16, 10, 8


def batch(data):
    lengths = torch.randint(2, L + 1, (B,))
    seq_onehots = (torch.arange(L)[None, :] < lengths[:, None]).float()
    events = data[torch.randint(0, len(data), (B, L))]
    return events, seq_onehots


class EventVAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2 * Z))
        self.dec = nn.Sequential(nn.Linear(Z, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x):
        mean, log_var = self.enc(x).chunk(2, -1)
        z = mean + torch.randn_like(mean) * (0.5 * log_var).exp()
        return self.dec(z), mean, log_var


model = EventVAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(1500):
    events, seq_onehots = batch(tr)
    recon, mean, log_var = model(events)
    rec_loss = ((recon - events) ** 2).sum(-1) / (2 * 0.15 ** 2) * seq_onehots
    kl_loss = (- 0.5 * torch.sum(1 + log_var - mean.pow(2) - log_var.exp()__KLDIM__)) * seq_onehots
    loss = (rec_loss + kl_loss).sum() / seq_onehots.sum()
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    recon, mean, log_var = model(te)
    mse = ((model.dec(mean) - te) ** 2).sum(-1).mean().item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__KLDIM__', '' if bug else ', dim=-1')
