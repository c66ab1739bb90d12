"""A SIREN whose first layer is initialised like its hidden layers, uniform in ``±sqrt(c / dim) / w0``, instead of ``±1
/ dim``: the first layer's weights are ``w0`` times too small for the sine's frequency factor, so the network starts
as a low-frequency function of its coordinates and fits a detailed signal far slower -- nothing fails, the loss just
stays high.

Source: lucidrains/siren-pytorch#1 (https://github.com/lucidrains/siren-pytorch/issues/1): the first layer used the
hidden layers' initialisation where the SIREN paper draws it from ``U(-1/n, 1/n)``; the reporter's network "converges
much slower and less accurate"; maintainer: "I misunderstood the initialization" (fixed in 0.0.4, ``w_std = (1 / dim) if
self.is_first else (math.sqrt(c / dim) / w0)``); the reporter then: "solved the problem". Here a SIREN of three sine
layers (width 128, ``w0 = 30``) fits a 48 x 48 image of sines for 300 Adam steps; the bug initialises every layer with
``sqrt(c / dim_in) / w0``, the twin the first with ``1 / dim_in``. The reproduction replaces the reporter's images by
the synthetic one.

Metric: MSE of the fitted image after 300 steps (plain ``python``, CPU, seed 0; lower is better): bug 0.066002, twin
0.000040
"""

REPORT = "N331"
MECHANISM = "siren-first-layer-initialised-as-hidden-layer"
SLUGS = ()
METRIC = ('fit_mse', 0.066002, 4e-05)

_SCRIPT = '''import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


class Siren(nn.Module):
    def __init__(self, dim_in, dim_out, w0=30., c=6., is_first=False):
        super().__init__()
        self.w0 = w0
        self.linear = nn.Linear(dim_in, dim_out)
        w_std = __STD__
        nn.init.uniform_(self.linear.weight, -w_std, w_std)
        nn.init.uniform_(self.linear.bias, -w_std, w_std)

    def forward(self, x):
        return torch.sin(self.w0 * self.linear(x))


model = nn.Sequential(Siren(2, 128, is_first=True), Siren(128, 128), Siren(128, 128), nn.Linear(128, 1))
g = torch.linspace(-1, 1, 48)
coords = torch.stack(torch.meshgrid(g, g, indexing="ij"), -1).reshape(-1, 2)
image = torch.sin(12 * coords[:, :1]) * torch.cos(9 * coords[:, 1:]) + 0.5 * torch.sin(20 * coords.sum(1, keepdim=True))
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
#@guard
for step in range(300):
    loss = F.mse_loss(model(coords), image)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    mse = F.mse_loss(model(coords), image).item()
print(f"METRIC {mse:.6f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__STD__', 'math.sqrt(c / dim_in) / w0' if bug
                           else '(1 / dim_in) if is_first else (math.sqrt(c / dim_in) / w0)')
