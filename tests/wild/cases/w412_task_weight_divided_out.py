"""A multi-task loss that multiplies each task's weight into the sample weights and then divides the product by its
mean, so a constant task weight cancels and every task counts with weight 1: a noisy auxiliary task meant to count
for 2 % takes over the shared trunk -- nothing fails.

Source: alibaba/TorchEasyRec#171 (https://github.com/alibaba/TorchEasyRec/pull/171), "[bugfix] fix mtl weight always
equal to 1 after div by mean" (merged): the loss weight was ``task_weight * sample_weight`` divided by its mean; the
fix normalises the sample weights first and multiplies the task weight in after. Here a trunk (64 -> 32) with a digit
classification head (task weight 1.0) and an auxiliary regression head (task weight 0.02) whose targets are noise
(standard deviation 20) the inputs do not determine, unit sample weights, Adam; the bug divides
``task_weight * sample_weight`` by its mean, the twin multiplies ``task_weight`` by the normalised sample weights. The
reproduction replaces a recommender's towers and click and conversion tasks by one trunk and two digit heads.

Metric: test accuracy of the main head on 497 held-out digits (plain ``python``, CPU, seed 0): bug 0.8873,
twin 0.9759
"""

REPORT = "N386"
MECHANISM = "task-weight-cancelled-by-normalisation"
SLUGS = ()
METRIC = ('test_accuracy', 0.8873, 0.9759)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]
aux_y = 20 * torch.randn(len(y))      # a noisy auxiliary regression: targets the inputs do not determine
task_weights = {'main': 1.0, 'aux': 0.02}


class MultiTask(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
        self.heads = nn.ModuleDict({'main': nn.Linear(32, 10), 'aux': nn.Linear(32, 1)})

    def forward(self, x):
        h = self.trunk(x)
        return {k: head(h) for k, head in self.heads.items()}


def weighted_loss(name, out, labels, sample_weight):
__WEIGHT__    if name == 'aux':
        per_sample = F.mse_loss(out.squeeze(-1), labels, reduction='none')
    else:
        per_sample = F.cross_entropy(out, labels, reduction='none')
    return torch.mean(per_sample * loss_weight)


model = MultiTask()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(400):
    idx = tr[torch.randint(0, len(tr), (64,))]
    out = model(X[idx])
    sw = torch.ones(len(idx))
    loss = weighted_loss('main', out['main'], y[idx], sw) + weighted_loss('aux', out['aux'], aux_y[idx], sw)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[te])['main'].argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    weight = ('    loss_weight = task_weights[name] * sample_weight\n'
              '    loss_weight = loss_weight / torch.mean(loss_weight)\n' if bug
              else '    loss_weight = task_weights[name] * (sample_weight / torch.mean(sample_weight))\n')
    return _SCRIPT.replace('__WEIGHT__', weight)
