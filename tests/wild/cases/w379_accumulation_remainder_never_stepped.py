"""Gradient accumulation that steps only once the samples accumulated since the last step reach a threshold: the
gradients of the batches left at the end of an epoch are computed and then thrown away by the next epoch's
``zero_grad``, so part of every epoch never updates the model and the run makes fewer steps than it should -- nothing
fails.

Source: tomhosking/torchseq#8 (https://github.com/tomhosking/torchseq/issues/8), "Gradient accumulation bug":
"`step()` is only triggered after the cumulative batch size exceeds a threshold - this means the last batch(es) of an
epoch will be ignored if they don't sum up to the threshold. The logic should force a step for the last few samples
of a dataset." (the maintainer's issue; "Fixed in 53c96f3d"). Here an MLP learns 1300 digits for 15 epochs of
shuffled batches of 64, accumulating until 800 samples before each SGD step; the bug steps only at the threshold, the
twin also forces a step for the samples left at the end of each epoch (the issue's fix). The reproduction replaces
torchseq's sequence-to-sequence models and token-count thresholds by digits and a sample-count threshold.

Metric: test accuracy on 497 digits (plain ``python``, CPU, seed 0): bug 0.8129, twin 0.8853
"""

REPORT = "N353"
MECHANISM = "accumulation-remainder-never-stepped"
SLUGS = ()
METRIC = ('test_accuracy', 0.8129, 0.8853)

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
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
#@guard
batch_size, min_samples_per_step = 64, 800
for epoch in range(15):
    order = tr[torch.randperm(len(tr))]
    opt.zero_grad()
    samples_since_step = 0
    for i in range(0, len(order), batch_size):
        j = order[i:i + batch_size]
        loss = F.cross_entropy(model(X[j]), y[j], reduction='sum') / min_samples_per_step
        loss.backward()
        samples_since_step += len(j)
        if samples_since_step >= min_samples_per_step:
            opt.step()
            opt.zero_grad()
            samples_since_step = 0
__REMAINDER__with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__REMAINDER__', '' if bug
                  else '    if samples_since_step > 0:\n        opt.step()\n        opt.zero_grad()\n')
    return s
