"""Stochastic weight averaging whose BatchNorm statistics are recomputed with ``momentum = 0.`` instead of
``None``: the statistics are reset and a pass over the training data is run, but a momentum of 0 keeps the
running mean and variance at their reset values (0 and 1), so the averaged model normalises nothing and its
accuracy collapses -- with no error.

Source: Lightning-AI/pytorch-lightning#14866 (https://github.com/Lightning-AI/pytorch-lightning/issues/14866),
"Potential bug in StochasticWeightAveraging causing incorrect batchnorm statistics": "my model ... has very bad
performance (accuracy ~0) after training with StochasticWeightAveraging. The model performs well (accuracy ~.75)
without ... comparing with the pytorch SWA implementation, which has ``module.momentum = None`` ... Setting
``module.momentum`` to ``None`` or ``0.`` behaves differently" (labels: bug; fix in #15113). Here an MLP whose
first layer is a BatchNorm over the raw pixel intensities (0-16) is trained on digits for 10 epochs, its weights
averaged over epochs 5-9 with ``torch.optim.swa_utils.AveragedModel``, and the averaged model's BatchNorm
statistics are recomputed as the callback does (reset, set the momentum, one pass over the training loader in
train mode); the bug sets 0., the twin None. The reproduction replaces the ResNet and ImageNet subset by the MLP
and digits, and Lightning's callback by its three steps written out.

Metric: the averaged model's test accuracy (plain ``python``, CPU, seed 0): bug 0.6177, twin 0.9738
"""

REPORT = "N320"
MECHANISM = "bn-recompute-momentum-zero-freezes-statistics"
SLUGS = ()
METRIC = ("test_accuracy", 0.6177, 0.9738)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.optim.swa_utils import AveragedModel

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32)
y = torch.tensor(y)
perm = torch.randperm(len(X))
X, y = X[perm], y[perm]
Xtr, ytr, Xte, yte = X[:1300], y[:1300], X[1300:], y[1300:]

model = nn.Sequential(nn.BatchNorm1d(64), nn.Linear(64, 64), nn.ReLU(), nn.BatchNorm1d(64), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
#@guard
swa_model = AveragedModel(model)
for epoch in range(10):
    model.train()
    for i in torch.randperm(len(Xtr)).split(64):
        loss = F.cross_entropy(model(Xtr[i]), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch >= 5:
        swa_model.update_parameters(model)


def reset_batch_norm_and_save_state(module):
    momenta = {}
    for m in module.modules():
        if isinstance(m, nn.BatchNorm1d):
            m.reset_running_stats()
            momenta[m] = m.momentum
            m.momentum = __MOMENTUM__
    return momenta


momenta = reset_batch_norm_and_save_state(swa_model)
swa_model.train()
with torch.no_grad():
    for i in torch.randperm(len(Xtr)).split(64):
        swa_model(Xtr[i])
for m, momentum in momenta.items():
    m.momentum = momentum
swa_model.eval()
with torch.no_grad():
    acc = (swa_model(Xte).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__MOMENTUM__', "0." if bug else "None")
