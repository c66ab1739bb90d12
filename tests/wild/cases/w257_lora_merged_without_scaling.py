"""A LoRA merge that adds ``B @ A`` to the base weight without the adapter's ``alpha / r`` scale: the adapter
was trained through ``scaling * (x @ A.T @ B.T)``, so the merged model applies a quarter of what was learnt
(here ``alpha / r`` is 4) -- with no error.

Source: hao-ai-lab/FastVideo#870 (https://github.com/hao-ai-lab/FastVideo/pull/870), "[bugfix] [lora] [CI] Fix
LoRA alpha scaling factor": "When doing inference, if the rank and the alpha are different, the strength of
which the lora is applied is wrong because merge_lora_weights in BaseLayerWithLoRA does not scale the whole
thing by alpha/rank. Fixed by: ... Apply alpha/rank scaling when merging LoRA weights" (merged).  Here an MLP
is pretrained on scikit-learn's digits and frozen, rank-4 adapters (alpha 16) on both layers learn a
relabelled version of the task, and the adapted layers are merged into plain ``nn.Linear`` layers for
evaluation: the buggy merge adds ``lora_B @ lora_A``, the twin ``scaling * (lora_B @ lora_A)``.  FastVideo
merges diffusion-transformer adapters loaded from a state dict; the merge function is written like its
``merge_lora_weights``.

Metric: test accuracy of the merged model on the adapted task (plain ``python``, CPU, seed 0): bug 0.1792, twin
0.8811
"""

REPORT = "N231"
MECHANISM = "lora-merge-omits-alpha-over-rank"
SLUGS = ()
METRIC = ("merged_test_accuracy", 0.1792, 0.8811)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]
Y2tr, Y2te = (Ytr + 3) % 10, (Yte + 3) % 10          # the adaptation task: relabelled classes

base = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
pre_opt = torch.optim.Adam(base.parameters(), lr=1e-2)
for step in range(200):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(base(Xtr[i]), Ytr[i])
    pre_opt.zero_grad()
    loss.backward()
    pre_opt.step()
for p in base.parameters():
    p.requires_grad_(False)


class LoRALinear(nn.Module):
    def __init__(self, layer, r=4, alpha=16):
        super().__init__()
        self.layer, self.scaling = layer, alpha / r
        self.lora_A = nn.Parameter(torch.randn(r, layer.in_features) * 0.01)
        self.lora_B = nn.Parameter(torch.zeros(layer.out_features, r))

    def forward(self, x):
        return self.layer(x) + self.scaling * (x @ self.lora_A.T @ self.lora_B.T)

    def merge_lora_weights(self):
        merged = nn.Linear(self.layer.in_features, self.layer.out_features)
        with torch.no_grad():
            merged.weight.copy_(self.layer.weight + __DELTA__)
            merged.bias.copy_(self.layer.bias)
        return merged


model = nn.Sequential(LoRALinear(base[0]), nn.ReLU(), LoRALinear(base[2]))
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.cross_entropy(model(Xtr[i]), Y2tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
merged = nn.Sequential(model[0].merge_lora_weights(), nn.ReLU(), model[2].merge_lora_weights())
with torch.no_grad():
    acc = (merged(Xte).argmax(1) == Y2te).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__DELTA__', 'self.lora_B @ self.lora_A' if bug else 'self.scaling * (self.lora_B @ self.lora_A)')
    return s
