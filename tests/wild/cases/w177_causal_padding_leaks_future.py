"""A "causal" convolution padded too little on the left (and the rest on the right to keep the
length): each output step sees the next input step, the next-step forecaster learns to copy the value
it is asked to predict, and once it has to forecast from the past alone it is far off -- with no error
and a training loss near zero.

Source: lucidrains/magvit2-pytorch#27 (https://github.com/lucidrains/magvit2-pytorch/pull/27), "Fix causal
info leakage in time downsample": "the current time downsample leaks causal information due to
insufficient padding on the left side. minimum repro/test, showing this and that the new version does
not leak ... ``x = F.pad(x, (self.time_pad, 0))``" (merged).  Here three stacked ``CausalConv`` layers
(kernel 3) forecast noisy sinusoids one step ahead with teacher forcing; the forecast is then measured
step by step on prefixes, the way it is used.  The buggy layer pads ``(kernel_size // 2,
kernel_size // 2)``, the twin ``(kernel_size - 1, 0)``.

Metric: one-step forecast MSE from the past only, steps 25-47 of 300 held-out series (plain
``python``, CPU, seed 0; lower is better): bug 0.5271, twin 0.0078
"""

REPORT = "N151"
MECHANISM = "causal-padding-leaks-future"
SLUGS = ()
METRIC = ("forecast_mse", 0.5271, 0.0078)

_SCRIPT = '''
import math

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
T = 48


def series(n):
    t = torch.arange(T, dtype=torch.float32)
    freq = 0.2 + 0.4 * torch.rand(n, 1, generator=g)
    phase = 2 * math.pi * torch.rand(n, 1, generator=g)
    return (torch.sin(freq * t + phase) + 0.05 * torch.randn(n, T, generator=g)).unsqueeze(1)  # (n, 1, T)


class CausalConv(nn.Module):
    def __init__(self, c_in, c_out, kernel_size=3):
        super().__init__()
        self.time_pad = __PAD__
        self.conv = nn.Conv1d(c_in, c_out, kernel_size)

    def forward(self, x):
        return self.conv(F.pad(x, self.time_pad))


model = nn.Sequential(CausalConv(1, 32), nn.ReLU(), CausalConv(32, 32), nn.ReLU(), CausalConv(32, 1))
x_train, x_val = series(2000), series(300)
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(10):
    for i in range(0, 2000, 100):
        x = x_train[i:i + 100]
        loss = F.mse_loss(model(x)[..., :-1], x[..., 1:])  # the output at step t predicts step t + 1
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():  # forecasting: at each step only the past is known
    errors = [(model(x_val[..., :t + 1])[..., -1] - x_val[..., t + 1]) ** 2 for t in range(24, T - 1)]
print(f"METRIC {torch.stack(errors).mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PAD__", "(kernel_size // 2, kernel_size // 2)" if bug else "(kernel_size - 1, 0)")
