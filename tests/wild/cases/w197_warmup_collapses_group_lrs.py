"""A warm-up scheduler that takes its peak learning rate from the optimizer but keeps only group 0's:
every parameter group warms up to (and stays at) the first group's rate, so a fine-tuning run whose new
head was given a larger rate than the pretrained backbone trains the head at the backbone's rate -- with
no error.

Source: deepspeedai/DeepSpeed#8171 (https://github.com/deepspeedai/DeepSpeed/pull/8171), "Fix WarmupLR
collapsing multi-group base LRs to group 0's": "When `warmup_max_lr` is left unspecified, `WarmupLR`
inherits the optimizer's learning rate ... The fallback computed: `warmup_max_lr = [group['lr'] for group in
self.optimizer.param_groups][0]` The trailing `[0]` reduces the per-group list to group 0's scalar.
`_format_param` then broadcasts that scalar back to every group ... So on an optimizer with multiple
parameter groups that have distinct base LRs, every group warms up to group 0's lr and the other groups'
configured LRs are silently discarded." (merged).  Here an MLP backbone pretrained on the digits 0-4 of
scikit-learn's digits is fine-tuned with a new head on the digits 5-9, the backbone at 1e-4 (group 0) and
the head at 1e-2 (group 1), under a linear warm-up of 30 steps written after ``WarmupLR``.  The buggy
scheduler's peak rates are ``[group['lr'] for group in param_groups][0]`` broadcast to every group, the
twin's the per-group list.

Metric: accuracy on the held-out digits 5-9 after three epochs (plain ``python``, CPU, seed 0): bug
0.2568, twin 0.6351
"""

REPORT = "N171"
MECHANISM = "warmup-peak-taken-from-group-zero"
SLUGS = ()
METRIC = ("val_accuracy", 0.2568, 0.6351)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
digits = load_digits()
X = torch.tensor(digits.data / 16.0, dtype=torch.float32)
y = torch.tensor(digits.target)
old, new = y < 5, y >= 5
x_old, y_old = X[old], y[old]
x_new, y_new = X[new], y[new] - 5
x_ft, y_ft, x_val, y_val = x_new[:600], y_new[:600], x_new[600:], y_new[600:]

backbone = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
pre_head = nn.Linear(32, 5)
pre_opt = torch.optim.Adam(list(backbone.parameters()) + list(pre_head.parameters()), lr=3e-3)
for epoch in range(10):
    for i in range(0, len(x_old), 32):
        loss = F.cross_entropy(pre_head(backbone(x_old[i:i + 32])), y_old[i:i + 32])
        pre_opt.zero_grad()
        loss.backward()
        pre_opt.step()


class WarmupLR:
    """Linear warm-up from 0 to each group's peak rate over warmup_num_steps, then constant."""

    def __init__(self, optimizer, warmup_num_steps=30):
        self.optimizer = optimizer
        self.warmup_num_steps = warmup_num_steps
__PEAK__
        self.step_count = 0
        self.step()

    def step(self):
        self.step_count += 1
        scale = min(1.0, self.step_count / self.warmup_num_steps)
        for group, peak in zip(self.optimizer.param_groups, self.warmup_max_lr):
            group["lr"] = peak * scale


head = nn.Linear(32, 5)
model = nn.Sequential(backbone, head)
opt = torch.optim.Adam([{"params": backbone.parameters(), "lr": 1e-4}, {"params": head.parameters(), "lr": 1e-2}])
scheduler = WarmupLR(opt)
#@guard
for epoch in range(3):
    perm = torch.randperm(600)
    for i in range(0, 600, 32):
        idx = perm[i:i + 32]
        loss = F.cross_entropy(model(x_ft[idx]), y_ft[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        scheduler.step()

with torch.no_grad():
    acc = (model(x_val).argmax(1) == y_val).float().mean()
print(f"METRIC {acc:.4f}")
'''

_BUG = """        warmup_max_lr = [group["lr"] for group in optimizer.param_groups][0]
        self.warmup_max_lr = [warmup_max_lr] * len(optimizer.param_groups)"""
_TWIN = """        warmup_max_lr = [group["lr"] for group in optimizer.param_groups]
        self.warmup_max_lr = list(warmup_max_lr)"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PEAK__", _BUG if bug else _TWIN)
