"""``'log'`` class weights computed as ``log(max_count / count)``: the most frequent class gets weight ``log(1) =
0``, so its examples contribute nothing to the loss and the classifier stops predicting it -- with no error.

Source: IndicoDataSolutions/finetune#181 (https://github.com/IndicoDataSolutions/finetune/issues/181), the
``class_weights='log'`` option gave the most common class a weight of zero; the maintainers fixed it in #183 (a
weight of ``log`` plus one). Here an MLP is trained on an imbalanced digits set (class 0 keeps all its examples,
the other classes a third of theirs) with class-weighted cross-entropy, and evaluated on the balanced validation
set; the buggy weights are ``log(max_count / count)``, the twin's ``1 + log(max_count / count)``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.8463, twin 0.9547
"""

REPORT = "N257"
MECHANISM = "log-class-weights-zero-for-majority"
SLUGS = ()
METRIC = ("val_accuracy", 0.8463, 0.9547)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, va = perm[:1400], perm[1400:]
keep = (Y[tr] < 3) | (torch.rand(len(tr)) < 0.33)
tr = tr[keep]

counts = torch.bincount(Y[tr], minlength=10).float()
weights = __WEIGHTS__
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    i = tr[torch.randint(0, len(tr), (64,))]
    loss = F.cross_entropy(model(X[i]), Y[i], weight=weights)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[va]).argmax(1) == Y[va]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    w = 'torch.log(counts.max() / counts)' if bug else '1 + torch.log(counts.max() / counts)'
    return _SCRIPT.replace('__WEIGHTS__', w)
