"""Min-SNR loss weighting written as a max: the signal-to-noise ratio is clamped from below at gamma instead of from
above, so the epsilon loss weight ``clipped_snr / snr`` is 1 at the low-noise steps (where Min-SNR would lower it)
and ``gamma / snr`` at the high-noise steps, thousands of times the rest at the noisiest; the denoiser is trained
almost only on pure noise and its samples land off the data -- nothing fails.

Source: lucidrains/recurrent-interface-network-pytorch#11
(https://github.com/lucidrains/recurrent-interface-network-pytorch/issues/11), "Min SNR weighting implemented as
max SNR weighting": "I believe that the Min SNR weighting is currently implemented as `loss_weight = max(snr,
self.min_snr_gamma)` instead of `loss_weight = min(snr, self.min_snr_gamma)` ... I think line 839 should be
`maybe_clipped_snr.clamp_(max = self.min_snr_gamma)`"; maintainer: "oh yes you are right! thank you for finding
this so quickly ... ugh i committed this error in a number of other repos too". Here a small MLP denoiser is
trained on a ring of eight Gaussians with a 200-step linear DDPM schedule (betas from 1e-4 to 0.1), the epsilon
objective and gamma 5 (the repository's default), and 1000 points are sampled with ancestral DDPM steps; the bug
clamps with ``min=``, the twin with ``max=``. The reproduction replaces RIN and images by an MLP and 2-D points,
and uses the epsilon branch of the weighting (``clipped_snr / snr``), one of the objectives the repository offers.

Metric: fraction of sampled points within 0.2 of a mode (plain ``python``, CPU, seed 0): bug 0.0030, twin 0.0460
"""

REPORT = "N391"
MECHANISM = "min-snr-weight-clamped-from-below"
SLUGS = ()
METRIC = ("sample_mode_precision", 0.003, 0.046)

_SCRIPT = '''import math

import torch
from torch import nn

torch.manual_seed(0)
T, GAMMA = 200, 5.0
betas = torch.linspace(1e-4, 0.1, T)
alphas = 1 - betas
ac = torch.cumprod(alphas, 0)
snr_all = ac / (1 - ac)
angles = torch.arange(8) * (2 * math.pi / 8)
modes = 2.0 * torch.stack([angles.cos(), angles.sin()], 1)


def data(n):
    return modes[torch.randint(0, 8, (n,))] + 0.05 * torch.randn(n, 2)


def temb(t):
    f = torch.arange(8) + 1.0
    a = t.float()[:, None] / T * f[None] * math.pi
    return torch.cat([a.sin(), a.cos()], 1)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(18, 64), nn.SiLU(), nn.Linear(64, 64), nn.SiLU(), nn.Linear(64, 2))

    def forward(self, x, t):
        return self.net(torch.cat([x, temb(t)], 1))


model = Denoiser()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(1500):
    x0 = data(256)
    t = torch.randint(0, T, (256,))
    eps = torch.randn_like(x0)
    a = ac[t][:, None]
    xt = a.sqrt() * x0 + (1 - a).sqrt() * eps
    mse = ((model(xt, t) - eps) ** 2).mean(1)
    snr = snr_all[t]
    maybe_clipped_snr = snr.clone()
    maybe_clipped_snr.clamp_(__CLAMP__=GAMMA)
    loss_weight = maybe_clipped_snr / snr
    loss = (mse * loss_weight).mean()
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    x = torch.randn(1000, 2)
    for i in reversed(range(T)):
        t = torch.full((1000,), i)
        eps = model(x, t)
        mean = (x - betas[i] / (1 - ac[i]).sqrt() * eps) / alphas[i].sqrt()
        x = mean + (betas[i].sqrt() * torch.randn_like(x) if i > 0 else 0)
    d = torch.cdist(x, modes).min(1).values
print(f"METRIC {(d < 0.2).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CLAMP__", "min" if bug else "max")
