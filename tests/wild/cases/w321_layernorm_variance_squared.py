"""A hand-written layer normalisation that divides by ``(variance + eps) ** 2`` where the standard deviation
``(variance + eps) ** 0.5`` belongs: the output's scale goes as the inverse cube of the input's spread, so the
layer amplifies small activations, crushes large ones and normalises nothing -- with no error.

Source: 131250208/TPlinker-joint-extraction#37 (https://github.com/131250208/TPlinker-joint-extraction/issues/37):
the conditional LayerNorm computed ``std = (variance + self.epsilon) ** 2``; maintainer: "Yes, you are right. But it
might not influence too much." Here a regression MLP with two hand-written LayerNorm layers (learned gain and bias,
as in TPlinker's) reads inputs whose scale varies by a factor of ten from sample to sample; the bug normalises by
``(variance + eps) ** 2``, the twin by ``(variance + eps) ** 0.5``. TPlinker's conditional LayerNorm (gain and bias
from a condition vector) is replaced by the plain one.

Metric: test mean squared error, lower is better (plain ``python``, CPU, seed 0): bug 149.9718, twin 0.0131
"""

REPORT = "N295"
MECHANISM = "layernorm-divides-by-squared-variance"
SLUGS = ()
METRIC = ("test_mse", 149.9718, 0.0131)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
DIM = 16
w_true = torch.randn(DIM)


def batch(n):
    scale = 10 ** (torch.rand(n, 1) * 2 - 1)
    z = torch.randn(n, DIM)
    y = torch.tanh(z @ w_true / 4).unsqueeze(1)
    return z * scale, y


class LayerNorm(nn.Module):
    def __init__(self, dim, epsilon=1e-5):
        super().__init__()
        self.gamma = nn.Parameter(torch.ones(dim))
        self.beta = nn.Parameter(torch.zeros(dim))
        self.epsilon = epsilon

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        variance = ((x - mean) ** 2).mean(-1, keepdim=True)
        std = __STD__
        return (x - mean) / std * self.gamma + self.beta


model = nn.Sequential(LayerNorm(DIM), nn.Linear(DIM, 64), nn.ReLU(), LayerNorm(64), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    x, y = batch(128)
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, y = batch(4000)
    mse = F.mse_loss(model(x), y).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__STD__', '(variance + self.epsilon) ** 2' if bug else '(variance + self.epsilon) ** 0.5')
