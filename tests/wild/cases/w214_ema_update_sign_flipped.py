"""An exponential moving average of the weights whose correction has the wrong sign: the shadow is moved
by ``+(1 - decay) * (shadow - param)`` instead of ``-(...)``, so it is pushed away from the live weights
and grows by a factor ``2 - decay`` per step, while training itself looks normal -- the saved averaged
model is garbage, with no error.

Source: ostris/ai-toolkit#1034 (https://github.com/ostris/ai-toolkit/issues/1034), "EMA shadow weights
diverge — `sub_` changed to `add_` in commit 4a41f14": "Since `gap = s - p`, the correct update is `s -=
(1 - decay) * gap`. With `add_`, the shadow becomes: `s_new = s + (1 - decay) * (s - p) = 1.01 * s - 0.01
* p` (at decay=0.99) so the shadow is pushed away from the parameters instead of toward them, multiplying by
1.01 every step. Impact: any run with `use_ema: true` saves diverging shadow weights. Training itself is
unaffected — the live parameters and the loss curve look completely normal — so there is no visible
signal that anything is wrong." (closed).  Here an MLP is trained on scikit-learn's digits with the
report's ``ExponentialMovingAverage.update`` (decay 0.99) after every step, and the averaged weights are
evaluated, as a run that saves and ships its EMA does.  The buggy update ends in ``s.add_(gap *
one_minus_decay)``, the twin in ``s.sub_(gap * one_minus_decay)``.

Metric: test accuracy of the EMA weights (plain ``python``, CPU, seed 0): bug 0.4584, twin 0.9144
"""

REPORT = "N188"
MECHANISM = "ema-update-sign-flipped"
SLUGS = ()
METRIC = ("ema_test_accuracy", 0.4584, 0.9144)

_SCRIPT = '''
import copy

import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target)
x_train, y_train, x_test, y_test = X[:1400], y[:1400], X[1400:], y[1400:]


class ExponentialMovingAverage:
    def __init__(self, model, decay=0.99):
        self.decay = decay
        self.shadow = copy.deepcopy(model)

    @torch.no_grad()
    def update(self, model):
        one_minus_decay = 1.0 - self.decay
        for s_param, param in zip(self.shadow.parameters(), model.parameters()):
            gap = s_param - param
__UPDATE__


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ema = ExponentialMovingAverage(model)
#@guard
for epoch in range(10):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 32):
        idx = perm[i:i + 32]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        ema.update(model)

with torch.no_grad():
    acc = (ema.shadow(x_test).argmax(1) == y_test).float().mean()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    op = "add_" if bug else "sub_"
    return _SCRIPT.replace("__UPDATE__", f"            s_param.{op}(gap * one_minus_decay)")
