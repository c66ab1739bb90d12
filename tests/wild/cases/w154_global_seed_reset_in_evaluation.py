"""An evaluation step that samples with ``generator=torch.manual_seed(seed)``: ``torch.manual_seed``
reseeds the global generator, so after every evaluation the training loader shuffles in the same
order and the training noise repeats, and a denoiser sees one fixed set of noisy images every epoch
and overfits to it -- with no error.

Source: huggingface/diffusers#7991 (https://github.com/huggingface/diffusers/issues/7991), "Bug in
diffusers basic training tutorial" (labels: bug): "setting the manual seed argument
(``generator=torch.manual_seed(config.seed)``) in the pipeline call inside evaluate() function rewinds
the dataloader shuffling, leading to overfitting due to the model see same sequence of training
examples after every evaluation call ... In the former case the training loss is lower but quality of
sampled images are worse"; reply: "try instead using
``generator=torch.Generator(device='cpu').manual_seed(config.seed)``".  Here an MLP denoiser is
trained on 200 digits with fresh Gaussian noise (sigma 0.6) at every step and evaluated after every
epoch on noise drawn from a seeded generator; the buggy evaluation seeds with ``torch.manual_seed``,
the twin with its own ``torch.Generator``.

Metric: denoising mean squared error on the 397 held-out digits with fresh noise (plain ``python``,
CPU, seed 0): bug 0.0612, twin 0.0438 (lower is better).
"""

REPORT = "N128"
MECHANISM = "global-seed-reset-in-loop"
SLUGS = ()
METRIC = ("test_denoising_mse", 0.0612, 0.0438)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
train_loader = DataLoader(TensorDataset(X[:200]), batch_size=20, shuffle=True)
SIGMA = 0.6

model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 64))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard


def evaluate(seed=0):
    generator = __GENERATOR__
    noise = torch.randn(16, 64, generator=generator)
    with torch.no_grad():
        return F.mse_loss(model(X[1400:1416] + SIGMA * noise), X[1400:1416]).item()


for epoch in range(150):
    for (xb,) in train_loader:
        noisy = xb + SIGMA * torch.randn_like(xb)
        loss = F.mse_loss(model(noisy), xb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    evaluate()

g = torch.Generator().manual_seed(123)
with torch.no_grad():
    mse = F.mse_loss(model(X[1400:] + SIGMA * torch.randn(len(X) - 1400, 64, generator=g)), X[1400:]).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    generator = "torch.manual_seed(seed)" if bug else "torch.Generator().manual_seed(seed)"
    return _SCRIPT.replace("__GENERATOR__", generator)
