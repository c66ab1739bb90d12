"""Parameter groups split by a name filter that matches nothing: the parameters are named
``model.backbone...``, the filter asks ``name.startswith("backbone")``, so the backbone lands in the
main group, is fine-tuned at the head's learning rate instead of its own small one, and overfits the
few new examples, losing what pretraining gave it -- with no error and a training loss that falls.

Source: huggingface/lerobot#280 (https://github.com/huggingface/lerobot/pull/280), "Bug fix: fix setting
different learning rates between backbone and main model in ACT policy": "This pull request fix a bug
where we were not identifying the backbone in the filtering of the parameters when specifying the
learning rate for the backbone and for the main model. As a result we were always assigning the main
model LR for the back bone instead of the backbone specific LR, ``lr_backbone``" (merged; reviewer: "it
is such a sneaky and silent bug").  Here a policy-like module (``model.backbone``, ``model.head``) is
pretrained on clean digits, given a fresh head, and fine-tuned on 50 noisier scans with ``lr=3e-2`` and
``lr_backbone=1e-5``.  The buggy ``is_backbone`` tests ``name.startswith("backbone")``, the twin
``"backbone" in name.split(".")``.

Metric: validation accuracy on the noisier scans after fine-tuning (plain ``python``, CPU, seed 0):
bug 0.5553, twin 0.7264 (seed 1: 0.5956 / 0.7223)
"""

REPORT = "N163"
MECHANISM = "param-group-filter-matches-nothing"
SLUGS = ()
METRIC = ("val_accuracy", 0.5553, 0.7264)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
x_pre, y_pre = X[:1000], Y[:1000]  # a backbone pretrained on clean digits
x_new = X[1000:] + 0.25 * torch.randn(len(X) - 1000, 64)  # the new task: noisier scans
x_ft, y_ft, x_val, y_val = x_new[:50], Y[1000:1050], x_new[300:], Y[1300:]


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = nn.ModuleDict({
            "backbone": nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU()),
            "head": nn.Linear(64, 10),
        })

    def forward(self, x):
        return self.model["head"](self.model["backbone"](x))


policy = Policy()
pre_opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
for epoch in range(30):  # pretraining
    for i in range(0, len(x_pre), 64):
        loss = F.cross_entropy(policy(x_pre[i:i + 64]), y_pre[i:i + 64])
        pre_opt.zero_grad()
        loss.backward()
        pre_opt.step()
policy.model["head"] = nn.Linear(64, 10)  # a fresh head for the new task


def is_backbone(name):
    return __FILTER__


lr, lr_backbone = 3e-2, 1e-5
params = [
    {"params": [p for n, p in policy.named_parameters() if not is_backbone(n) and p.requires_grad]},
    {"params": [p for n, p in policy.named_parameters() if is_backbone(n) and p.requires_grad], "lr": lr_backbone},
]
opt = torch.optim.Adam(params, lr=lr)
#@guard
for epoch in range(200):
    loss = F.cross_entropy(policy(x_ft), y_ft)
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    acc = (policy(x_val).argmax(1) == y_val).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FILTER__", 'name.startswith("backbone")' if bug else '"backbone" in name.split(".")')
