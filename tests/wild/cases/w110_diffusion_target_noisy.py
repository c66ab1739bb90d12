"""A denoising diffusion model whose noise-prediction network is trained to output the noisy input
``x_t`` instead of the noise: sampling still reads the output as the noise, so the reverse process
subtracts the wrong quantity at every step and the samples miss the data.

Source: irom-princeton/dppo#14 (https://github.com/irom-princeton/dppo/issues/14), "A question about
the argument in mse_loss": "why does it need to `return F.mse_loss(x_recon, x_noisy, reduction=\\"mean\\")`
instead of ... `x_start`?"; maintainer: "Ah that is a bug --- we started by predicting `x_start` at the
beginning of the project, and then switched to predict epsilon instead. At one point we made the bug.
Fixed now".  Here a DDPM (50 steps, linear betas) with an MLP noise predictor learns a mixture of four
2-D Gaussians; the buggy loss regresses ``x_t``, the twin the noise; both sample with the
epsilon-parameterised reverse step.

Metric: mean distance of 1000 samples to the nearest mixture centre (plain ``python``, CPU, seed 0;
lower is better): bug 2.3316, twin 0.2561.
"""

REPORT = "N84"
MECHANISM = "diffusion-wrong-regression-target"
SLUGS = ()
METRIC = ("sample_distance_to_modes", 2.3316, 0.2561)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T = 50
betas = torch.linspace(1e-4, 0.2, T)
alphas = 1 - betas
abar = torch.cumprod(alphas, 0)
centres = torch.tensor([[2.0, 2.0], [-2.0, 2.0], [2.0, -2.0], [-2.0, -2.0]])


def data(n):
    return centres[torch.randint(4, (n,))] + 0.15 * torch.randn(n, 2)


class Denoiser(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(3, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 2))

    def forward(self, x, t):
        return self.net(torch.cat([x, t[:, None].float() / T], 1))


model = Denoiser()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for step in range(2000):
    x0 = data(256)
    t = torch.randint(T, (256,))
    noise = torch.randn_like(x0)
    x_noisy = abar[t].sqrt()[:, None] * x0 + (1 - abar[t]).sqrt()[:, None] * noise
    x_recon = model(x_noisy, t)
    loss = F.mse_loss(x_recon, __TARGET__)
    opt.zero_grad()
    loss.backward()
    opt.step()

model.eval()
with torch.no_grad():
    x = torch.randn(1000, 2)
    for t in reversed(range(T)):
        eps = model(x, torch.full((1000,), t))
        x = (x - betas[t] / (1 - abar[t]).sqrt() * eps) / alphas[t].sqrt()
        if t > 0:
            x = x + betas[t].sqrt() * torch.randn_like(x)
dist = torch.cdist(x, centres).min(1).values.mean().item()
print(f"METRIC {dist:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TARGET__", "x_noisy" if bug else "noise")
