"""A LoCon (LoRA) layer whose forward multiplies the sum of the frozen layer's output and the low-rank delta by
``multiplier * scale``: the base model's own output is scaled too, so switching the adapter off (multiplier 0)
or weakening it does not give the original model back -- with no error.

Source: KohakuBlueleaf/LyCORIS#26 (https://github.com/KohakuBlueleaf/LyCORIS/pull/26), "Update locon.py":
"previously, the scaling and multiplier was applied to the original output, which disturbed the original
model"; the code (quoted in #23) was ``return self.dropout(self.org_forward(x) + self.lora_up(self.lora_mid(
self.lora_down(x)))) * self.multiplier * self.scale``; the merged fix applies dropout, multiplier and scale to
the delta only ("The dropout has to be applied on the Delta, not on the original output"); maintainer: "Good
one". Here an MLP is trained on digits and frozen, a LoCon adapter (rank 4, alpha 1, so scale 0.25) on its first
layer is trained on mirrored digits, and the adapter is then switched off (multiplier 0) to use the original
model on upright digits; the bug keeps the scaled sum, the twin the merged form. The reproduction replaces the
diffusion UNet's convolutions by a linear layer and the image generation by digit classification.

Metric: test accuracy on upright digits with the adapter switched off (plain ``python``, CPU, seed 0): bug
0.1046, twin 0.9759
"""

REPORT = "N311"
MECHANISM = "adapter-scale-applied-to-base-output"
SLUGS = ()
METRIC = ("test_accuracy_adapter_off", 0.1046, 0.9759)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(X))
X, y = X[perm], y[perm]
Xtr, ytr, Xte, yte = X[:1300], y[:1300], X[1300:], y[1300:]
base = nn.Sequential(nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 64), nn.Tanh(), nn.Linear(64, 10))
bopt = torch.optim.Adam(base.parameters(), lr=1e-2)
for step in range(300):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(base(Xtr[i]), ytr[i])
    bopt.zero_grad()
    loss.backward()
    bopt.step()
for p in base.parameters():
    p.requires_grad_(False)


def mirror(x):
    return x.view(-1, 8, 8).flip(2).reshape(-1, 64)


class LoConLinear(nn.Module):
    def __init__(self, org, dim=4, alpha=1.0, multiplier=1.0, dropout=0.0):
        super().__init__()
        self.org_forward = org.forward
        self.lora_down = nn.Linear(org.in_features, dim, bias=False)
        self.lora_up = nn.Linear(dim, org.out_features, bias=False)
        nn.init.zeros_(self.lora_up.weight)
        self.scale = alpha / dim
        self.multiplier = multiplier
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        __FORWARD__


model = nn.Sequential(LoConLinear(base[0]), base[1], base[2], base[3], base[4])
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(mirror(Xtr[i])), ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
model[0].multiplier = 0.0
with torch.no_grad():
    acc = (model(Xte).argmax(1) == yte).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__FORWARD__', """return self.dropout(
            self.org_forward(x) + self.lora_up(self.lora_down(x))
        ) * self.multiplier * self.scale""" if bug else """return self.org_forward(x) + self.dropout(
            self.lora_up(self.lora_down(x))
        ) * self.multiplier * self.scale""")
