"""Quantisation-aware training with learnable activation scales whose fake-quantize step is one
``autograd.Function`` that returns a gradient for the input only (``None`` for the scale): the scales are
``nn.Parameter``s in the optimizer, but they never receive a gradient, so they stay at their initial value and the
outputs stay clipped to the initial range -- nothing fails, the scales simply never move.

Source: pytorch/ao#2280 (https://github.com/pytorch/ao/pull/2280), "Fix QAT range learning, ensure scales get
gradients": "The previous `_GenericFakeQuantized` nulled all gradients except the ones for the input. This is
problematic for range learning because scales and zero points are now `nn.Parameters` and actually require
gradients. This commit fixes this by reducing the scope of the `autograd.Function` to `torch.round` only" (merged).
Here a three-layer regression MLP quantises every layer's output to signed 8 bits with a learnable per-layer scale,
started at 0.01 (a range of about +-1.28, while the targets reach about +-8); the bug wraps round, clamp and rescale
in one Function whose backward passes the straight-through gradient to the input and ``None`` to the scale, the
twin (the PR's fix) makes only the rounding a straight-through Function and lets autograd differentiate the rest,
scale included. The reproduction replaces torchao's quantizers and a language model by this small regression and
symmetric per-tensor activation scales without zero points.

Metric: test mean squared error on 500 held-out points (plain ``python``, CPU, seed 0, lower is better): bug
40.6839, twin 0.0956
"""

REPORT = "N350"
MECHANISM = "fake-quant-function-returns-no-scale-gradient"
SLUGS = ()
METRIC = ('test_mse', 40.6839, 0.0956)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
X = torch.randn(2000, 8)
w_true = torch.randn(8) * 2.0
y = (X @ w_true + 0.5 * torch.sin(3 * X[:, 0])).unsqueeze(1)
Xtr, ytr, Xte, yte = X[:1500], y[:1500], X[1500:], y[1500:]


class FakeQuant(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale):
        q = torch.clamp(torch.round(x / scale), -128, 127)
        ctx.save_for_backward((x / scale >= -128) & (x / scale <= 127))
        return q * scale

    @staticmethod
    def backward(ctx, grad):
        (inside,) = ctx.saved_tensors
        return grad * inside, None


class RoundSTE(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return torch.round(x)

    @staticmethod
    def backward(ctx, grad):
        return grad


def fake_quant(x, scale):
__FAKE_QUANT__


class QLinear(nn.Linear):
    def __init__(self, i, o):
        super().__init__(i, o)
        self.act_scale = nn.Parameter(torch.tensor(0.01))

    def forward(self, x):
        return fake_quant(super().forward(x), self.act_scale)


model = nn.Sequential(QLinear(8, 64), nn.ReLU(), QLinear(64, 64), nn.ReLU(), QLinear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(1500):
    i = torch.randint(0, 1500, (64,))
    loss = F.mse_loss(model(Xtr[i]), ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    mse = F.mse_loss(model(Xte), yte).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__FAKE_QUANT__', '    return FakeQuant.apply(x, scale)' if bug
                           else '    return torch.clamp(RoundSTE.apply(x / scale), -128, 127) * scale')
