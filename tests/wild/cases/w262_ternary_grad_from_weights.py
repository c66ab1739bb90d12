"""A trained-ternary quantiser whose backward pass builds the latent weights' gradient from the weights
instead of the incoming gradient: ``a * full_precision_data * w_p + ...`` where ``a * grad_data * w_p + ...``
was meant, so the full-precision weights drift with their own values and the loss never steers them --
with no error.

Source: vinsis/ternary-quantization#1 (https://github.com/vinsis/ternary-quantization/issues/1), "gradient
issue": "In quantionization.py line14: should `full_precision_grad = a * full_precision_data * w_p_data + b *
full_precision_data * w_n_data + c * full_precision_data * 1` be `full_precision_grad = a * grad_data* w_p_data
+ b * grad_data* w_n_data + c * grad_data* 1`? It seems the original gradient not used if employing
full_precision_data."; maintainer: "Good catch! I fixed the issue and found that the model training is much
more stable now. I was able to get an accuracy of 98.5% on quantized model."  Here a two-layer MLP with
ternary weights (threshold 0.05 of the largest weight, learnt positive and negative scales) is trained on
scikit-learn's digits with a custom ``autograd.Function`` written like the repository's; the buggy backward
multiplies the masks by ``full_precision_data``, the twin by ``grad_data``.  The repository quantises a CNN on
MNIST.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.2881, twin 0.9330
"""

REPORT = "N236"
MECHANISM = "quantiser-grad-built-from-weights"
SLUGS = ()
METRIC = ("test_accuracy", 0.2881, 0.9330)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]


class Ternarize(torch.autograd.Function):
    """Trained ternary quantization: latent full-precision weights, scales w_p and w_n."""

    @staticmethod
    def forward(ctx, full_precision_data, w_p, w_n, t=0.05):
        delta = t * full_precision_data.abs().max()
        a = (full_precision_data > delta).float()
        b = (full_precision_data < -delta).float()
        ctx.save_for_backward(full_precision_data, a, b, w_p, w_n)
        return w_p * a - w_n * b

    @staticmethod
    def backward(ctx, grad_data):
        full_precision_data, a, b, w_p, w_n = ctx.saved_tensors
        c = 1 - a - b
        full_precision_grad = a * __G__ * w_p + b * __G__ * w_n + c * __G__ * 1
        return full_precision_grad, (a * grad_data).sum().view(1), -(b * grad_data).sum().view(1), None


class TernaryLinear(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(n_out, n_in) * n_in ** -0.5)
        self.bias = nn.Parameter(torch.zeros(n_out))
        self.w_p = nn.Parameter(torch.ones(1) * 0.1)
        self.w_n = nn.Parameter(torch.ones(1) * 0.1)

    def forward(self, x):
        return F.linear(x, Ternarize.apply(self.weight, self.w_p, self.w_n), self.bias)


model = nn.Sequential(TernaryLinear(64, 64), nn.ReLU(), TernaryLinear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(400):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(Xte).argmax(1) == Yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__G__', 'full_precision_data' if bug else 'grad_data')
    return s
