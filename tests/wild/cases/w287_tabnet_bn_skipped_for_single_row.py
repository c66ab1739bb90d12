"""A ghost batch normalisation that returns its input unchanged when the batch holds a single row: trained on
batches, the network normalises its features; served one row at a time, it skips the normalisation in evaluation
mode too and runs on raw features the next layer never saw -- with no error.

Source: ludwig-ai/ludwig#2299 (https://github.com/ludwig-ai/ludwig/pull/2299), TabNet's batch normalisation was
skipped for batches of one row, so predicting a single example ran a different network from predicting a batch;
the fix applies the normalisation (with its running statistics) in evaluation whatever the batch size (merged).
Here an MLP with a ghost batch normalisation on its raw tabular input (features with offsets and scales far from
zero and one) is trained on four Gaussian classes in batches of 128, then evaluated row by row as a serving
endpoint does; the buggy layer returns ``x`` when ``len(x) == 1``, the twin only in training (where a single row
has no batch statistics). Ludwig's TabNet is replaced by a small MLP with the same normalisation layer.

Metric: test accuracy, one row per forward (plain ``python``, CPU, seed 0): bug 0.3860, twin 0.9900
"""

REPORT = "N261"
MECHANISM = "batchnorm-skipped-for-single-row-batches"
SLUGS = ()
METRIC = ("test_accuracy", 0.3860, 0.9900)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
D, K = 12, 4
centres = torch.randn(K, D)
offset = 20 * torch.randn(D)
scale = torch.exp(1.5 * torch.randn(D))


def rows(n):
    y = torch.randint(0, K, (n,))
    z = centres[y] + 0.7 * torch.randn(n, D)
    return offset + scale * z, y


x_tr, y_tr = rows(4000)
x_te, y_te = rows(500)


class GhostBatchNorm(nn.Module):
    def __init__(self, d, virtual_batch=32):
        super().__init__()
        self.bn = nn.BatchNorm1d(d, momentum=0.05)
        self.virtual_batch = virtual_batch

    def forward(self, x):
        if __SKIP__:
            return x
        if self.training:
            return torch.cat([self.bn(c) for c in x.split(self.virtual_batch)])
        return self.bn(x)


model = nn.Sequential(GhostBatchNorm(D), nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, K))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = torch.randint(0, len(x_tr), (128,))
    loss = F.cross_entropy(model(x_tr[i]), y_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    pred = torch.cat([model(x_te[j:j + 1]).argmax(1) for j in range(len(x_te))])
print(f"METRIC {(pred == y_te).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__SKIP__', 'x.shape[0] == 1' if bug else 'self.training and x.shape[0] == 1')
