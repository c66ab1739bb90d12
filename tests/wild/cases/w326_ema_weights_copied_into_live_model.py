"""EMA weights copied into the live training model to run validation and never copied back: after each validation
the model continues training from the averaged, lagging weights, and its optimizer state no longer matches them, so
every validation drags training back -- with no error.

Source: huggingface/diffusers#2321 (https://github.com/huggingface/diffusers/issues/2321): a training example did
``ema_unet.copy_to(unet.parameters())`` to sample validation images and went on training the same ``unet``; the
maintainer agreed it overwrites the trained weights, and #2706 added ``store``/``restore`` around validation. Here a
small MLP regresses a smooth function with Adam, an EMA (decay 0.995) of its weights is kept, and every 20 steps
the EMA weights are copied into the model to compute a validation loss; the bug leaves them there, the twin stores
the trained weights first and restores them after. The UNet, the noise scheduler and image sampling are replaced by
the regression and its validation loss.

Metric: test mean squared error of the trained model after 600 steps, lower is better (plain ``python``, CPU, seed
0): bug 0.0970, twin 0.0027
"""

REPORT = "N300"
MECHANISM = "ema-weights-left-in-training-model"
SLUGS = ()
METRIC = ("test_mse", 0.0970, 0.0027)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def batch(n):
    x = torch.rand(n, 2) * 4 - 2
    return x, torch.sin(2 * x[:, :1]) * torch.cos(x[:, 1:])


class EMA:
    def __init__(self, params, decay):
        self.decay = decay
        self.shadow = [p.detach().clone() for p in params]
        self.stored = None

    @torch.no_grad()
    def step(self, params):
        for s, p in zip(self.shadow, params):
            s.mul_(self.decay).add_(p, alpha=1 - self.decay)

    @torch.no_grad()
    def copy_to(self, params):
        for s, p in zip(self.shadow, params):
            p.copy_(s)

    @torch.no_grad()
    def store(self, params):
        self.stored = [p.detach().clone() for p in params]

    @torch.no_grad()
    def restore(self, params):
        for s, p in zip(self.stored, params):
            p.copy_(s)


model = nn.Sequential(nn.Linear(2, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
ema = EMA(model.parameters(), 0.995)
#@guard
for step in range(1, 601):
    x, y = batch(128)
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    ema.step(model.parameters())
    if step % 20 == 0:
        __BEFORE__
        ema.copy_to(model.parameters())
        with torch.no_grad():
            xv, yv = batch(256)
            val = F.mse_loss(model(xv), yv).item()
        __AFTER__
with torch.no_grad():
    x, y = batch(4000)
    mse = F.mse_loss(model(x), y).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.replace('__BEFORE__', 'pass').replace('__AFTER__', 'pass')
    return (_SCRIPT.replace('__BEFORE__', 'ema.store(model.parameters())')
            .replace('__AFTER__', 'ema.restore(model.parameters())'))
