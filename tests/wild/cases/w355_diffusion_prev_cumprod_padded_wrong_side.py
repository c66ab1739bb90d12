"""A DDPM whose ``alphas_cumprod_prev`` is padded on the wrong side: ``F.pad(alphas_cumprod[:-1], (0, 1),
value=1.)`` appends the 1 at the end instead of prepending it, so at every step the "previous" cumulative product
is the current one (and 1 at the last step), the posterior mean and variance used to sample are wrong, and the
samples land far from the data -- while training, which reads only ``alphas_cumprod``, is unchanged.

Source: lucidrains/denoising-diffusion-pytorch#18
(https://github.com/lucidrains/denoising-diffusion-pytorch/issues/18): the reporter points at
``alphas_cumprod_prev = F.pad(alphas_cumprod[:-1], (0, 1), value = 1.)`` and that the padding must be ``(1, 0)``;
maintainer: "oh yes 🤦 thank you so much for catching this!" (fixed). Here a small noise-prediction MLP is
trained on eight Gaussian modes on a circle (T = 50 steps, a linear beta schedule) and samples 1000 points with
the repository's posterior (predicted x0 clipped to [-1, 1], posterior mean from the two coefficients, posterior
variance); the bug pads ``(0, 1)``, the twin ``(1, 0)``. The reproduction replaces the image UNet and images by
the MLP and two-dimensional points, and its metric is the samples' mean distance to the nearest mode.

Metric: mean distance of a sample to the nearest mode (plain ``python``, CPU, seed 0; lower is better): bug
7.2984, twin 0.3148
"""

REPORT = "N329"
MECHANISM = "diffusion-previous-cumprod-padded-on-wrong-side"
SLUGS = ()
METRIC = ("sample_mode_distance", 7.2984, 0.3148)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T = 50
betas = torch.linspace(1e-4, 0.2, T)
alphas = 1. - betas
alphas_cumprod = torch.cumprod(alphas, dim=0)
alphas_cumprod_prev = __PAD__
posterior_variance = betas * (1. - alphas_cumprod_prev) / (1. - alphas_cumprod)
posterior_mean_coef1 = betas * alphas_cumprod_prev.sqrt() / (1. - alphas_cumprod)
posterior_mean_coef2 = (1. - alphas_cumprod_prev) * alphas.sqrt() / (1. - alphas_cumprod)

angles = torch.arange(8) * (2 * math.pi / 8)
modes = 0.8 * torch.stack([angles.cos(), angles.sin()], 1)


def data(n):
    return modes[torch.randint(0, 8, (n,))] + 0.03 * torch.randn(n, 2)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.t_embed = nn.Embedding(T, 64)
        self.inp = nn.Linear(2, 64)
        self.body = nn.Sequential(nn.SiLU(), nn.Linear(64, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(),
                                  nn.Linear(128, 2))

    def forward(self, x, t):
        return self.body(self.inp(x) + self.t_embed(t))


model = Denoiser()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for step in range(1000):
    x0 = data(128)
    t = torch.randint(0, T, (128,))
    noise = torch.randn_like(x0)
    ac = alphas_cumprod[t][:, None]
    xt = ac.sqrt() * x0 + (1 - ac).sqrt() * noise
    loss = F.mse_loss(model(xt, t), noise)
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    x = torch.randn(1000, 2)
    for i in reversed(range(T)):
        t = torch.full((1000,), i, dtype=torch.long)
        eps = model(x, t)
        x0_hat = ((1. / alphas_cumprod[i]).sqrt() * x - (1. / alphas_cumprod[i] - 1).sqrt() * eps).clamp(-1., 1.)
        mean = posterior_mean_coef1[i] * x0_hat + posterior_mean_coef2[i] * x
        x = mean + (posterior_variance[i].sqrt() * torch.randn_like(x) if i > 0 else 0.)
    err = torch.cdist(x, modes).min(1).values.mean().item()
print(f"METRIC {err:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__PAD__', "F.pad(alphas_cumprod[:-1], (0, 1), value=1.)" if bug
                           else "F.pad(alphas_cumprod[:-1], (1, 0), value=1.)")
