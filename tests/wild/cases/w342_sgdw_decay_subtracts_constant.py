"""A hand-written SGDW whose decoupled weight decay subtracts the constant ``weight_decay * lr`` from every weight
instead of multiplying the weights by ``1 - weight_decay * lr``: each step shifts every weight down by the same
amount whatever its value, a pull towards minus infinity rather than towards zero, and training ends worse than
plain SGD -- with no error.

Source: jettify/pytorch-optimizer#454 (https://github.com/jettify/pytorch-optimizer/issues/454), "spot bug in SGDW
implementation (weight decay part)": "this line of code update weight decay with theta_t <- theta_t - lambda alpha
where it should be theta_t <- theta_t * (1 - lambda alpha). This result in poor performance of training compared
to SGD with the same set of optimization hyper-parameter." (the fix, #455, open). Here a hand-written SGDW
(momentum, then the decoupled decay, then the step) trains a digits MLP with weight decay 0.1 for ten
epochs; the bug subtracts ``weight_decay * lr``, the twin multiplies by ``1 - weight_decay * lr``. The
reproduction replaces the reporter's model and data by the digits MLP.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.0805, twin 0.9537
"""

REPORT = "N316"
MECHANISM = "decoupled-decay-subtracts-constant"
SLUGS = ()
METRIC = ("test_accuracy", 0.0805, 0.9537)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16
y = torch.tensor(y)
perm = torch.randperm(len(X))
X, y = X[perm], y[perm]
Xtr, ytr, Xte, yte = X[:1300], y[:1300], X[1300:], y[1300:]


class SGDW(torch.optim.Optimizer):
    def __init__(self, params, lr, momentum=0.9, weight_decay=0.0):
        super().__init__(params, dict(lr=lr, momentum=momentum, weight_decay=weight_decay))

    @torch.no_grad()
    def step(self):
        for group in self.param_groups:
            weight_decay = group["weight_decay"]
            for p in group["params"]:
                if p.grad is None:
                    continue
                state = self.state[p]
                if "momentum_buffer" not in state:
                    state["momentum_buffer"] = p.grad.clone()
                buf = state["momentum_buffer"]
                buf.mul_(group["momentum"]).add_(p.grad)
                if weight_decay != 0:
                    __DECAY__
                p.add_(buf, alpha=-group["lr"])


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = SGDW(model.parameters(), lr=0.05, momentum=0.9, weight_decay=0.1)
#@guard
for epoch in range(10):
    for i in torch.randperm(len(Xtr)).split(32):
        loss = F.cross_entropy(model(Xtr[i]), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    acc = (model(Xte).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__DECAY__', "p.add_(-weight_decay * group['lr'])" if bug
                           else "p.mul_(1 - weight_decay * group['lr'])")
