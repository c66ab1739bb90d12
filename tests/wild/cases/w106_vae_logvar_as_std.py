"""A VAE whose reparameterisation multiplies the noise by ``logvar.exp()`` (the variance) instead of
``(0.5 * logvar).exp()`` (the standard deviation), while the KL term treats ``logvar`` as the log
variance: the posterior the model samples from is not the one its KL term prices, and the bound it
optimises is not the evidence lower bound of the model it trains.

Source: rachtsingh/ibp_vae#3 (https://github.com/rachtsingh/ibp_vae/issues/3), "something wrong in
normal reparametrization_gaussian": ``return mu + (noise * logvar.exp())`` -- "since logvar.exp() is
variance, I think it should be corrected to (0.5 * logvar).exp() to make it as standard-deviation. By
changing this, I found that MNIST test IWAE becomes much different from what you have reported".
Here a small Gaussian VAE is trained on the digits with the analytic KL in ``logvar``; each script
then scores the validation digits with the evidence lower bound of the posterior it actually samples
from (standard deviation given by its own ``std(logvar)``, KL computed from that standard deviation).

Metric: validation negative ELBO per digit, in nats (plain ``python``, CPU, seed 0; lower is
better): bug 26.023, twin 24.7803.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N80"
MECHANISM = "reparameterisation-variance-as-std"
SLUGS = ()
METRIC = ("val_negative_elbo", 26.023, 24.7803)

_SCRIPT = PRELUDE + '''

def std(logvar):
    return __STD__


class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 16))
        self.dec = nn.Sequential(nn.Linear(8, 128), nn.ReLU(), nn.Linear(128, 64))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * std(logvar)
        return self.dec(z), mu, logvar


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(30):
    for xb, _ in loader:
        logits, mu, logvar = model(xb)
        recon = F.binary_cross_entropy_with_logits(logits, xb, reduction="sum") / len(xb)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / len(xb)
        opt.zero_grad()
        (recon + kl).backward()
        opt.step()

model.eval()
torch.manual_seed(1)
with torch.no_grad():
    xv = X[1400:]
    logits, mu, logvar = model(xv)
    s = std(logvar)
    recon = F.binary_cross_entropy_with_logits(logits, xv, reduction="sum") / len(xv)
    kl = 0.5 * torch.sum(s.pow(2) + mu.pow(2) - 1 - torch.log(s.pow(2))) / len(xv)
print(f"METRIC {(recon + kl).item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__STD__", "logvar.exp()" if bug else "(0.5 * logvar).exp()")
