"""``binary_cross_entropy_with_logits`` called with its arguments swapped in a VAE's reconstruction
loss: the data is passed as the logits and the decoder's logits as the targets.  The "loss" is then
linear in the decoder's output with slope ``-log(sigmoid(x) / (1 - sigmoid(x))) = -x`` per pixel, so
it falls without bound as the logits of every inked pixel grow; training runs and the loss keeps
decreasing while the reconstructions turn into saturated blobs.

Source: autonomousvision/sledge#4 (https://github.com/autonomousvision/sledge/issues/4), "VAE loss":
"I think there is a mistake in _sledge/autoencoder/modeling/objectives/vae_objective.py:55_. The
arguments of binary_cross_entropy_with_logits may need to be swapped"; maintainer: "you're right. We
accidentally introduced the bug during refactoring. We will fix the ordering in the upcoming
release."  Here a small VAE is trained on the digits (pixels in [0, 1]) with the reconstruction term
``F.binary_cross_entropy_with_logits(x, logits)``; the twin passes ``(logits, x)``.

Metric: mean squared reconstruction error on the validation digits (plain ``python``, CPU, seed 0;
lower is better): bug 0.6263, twin 0.0652.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N64"
MECHANISM = "loss-arguments-swapped"
SLUGS = ()
METRIC = ("val_reconstruction_mse", 0.6263, 0.0652)

_SCRIPT = PRELUDE + '''

class VAE(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16))
        self.dec = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64))

    def forward(self, x):
        mu, logvar = self.enc(x).chunk(2, dim=1)
        z = mu + torch.randn_like(mu) * (0.5 * logvar).exp()
        return self.dec(z), mu, logvar


model = VAE()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(10):
    for xb, _ in loader:
        logits, mu, logvar = model(xb)
        recon = F.binary_cross_entropy_with_logits(__ARGS__, reduction="sum") / len(xb)
        kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp()) / len(xb)
        loss = recon + kl
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.2f}")

model.eval()
with torch.no_grad():
    mu, _ = model.enc(X[1400:]).chunk(2, dim=1)
    mse = F.mse_loss(torch.sigmoid(model.dec(mu)), X[1400:]).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ARGS__", "xb, logits" if bug else "logits, xb")
