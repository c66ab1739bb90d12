"""A mixture-of-experts load-balance loss that multiplies the experts' load fractions (shape ``[E]``) by the top-k mean
scores (shape ``[top_k]``) through broadcasting and sums every product: with top-k weights that sum to one per token
the loss is the constant ``E`` whatever the routing, so it sends no gradient and a router that starts skewed stays
collapsed on two of eight experts, with no error.

Source: mindspore-ai/hyper-parallel#752 (https://github.com/mindspore-ai/hyper-parallel/issues/752), "[Bug] MoE
_compute_load_balance_loss may become constant and ignore routing distribution": "``expert_fraction`` with shape
``[num_experts]``, ``mean_score`` with shape ``[top_k]``, then multiplied via broadcasting and summed all elements. This
collapses to a near-constant value and does not reflect routing imbalance severity" (open; the reporter's reproduction,
"the old implementation returns effectively constant behavior", and fix). Here a digits classifier routes a hidden layer
to 8 small experts, top-2 with renormalised weights, the router's bias started in favour of two experts, and adds 0.05
times the auxiliary loss; the bug computes the broadcast product, the twin the usual ``E * sum(expert_fraction * mean
router probability)``. The reproduction departs in two ways: the router starts skewed (a collapsed router stands in for
one that collapsed during training), and the twin takes the mean of the full router probabilities (the Switch
Transformer form) where the reporter's fix accumulates the top-k weights onto their experts (measured with it at seed 0:
0.3829 at weight 0.05, 0.2229 at 0.5, a smaller gap).

Metric: the busiest expert's share of routed slots on 397 test digits (plain ``python``, CPU, seed 0; 0.125 is balanced,
lower is better): bug 0.4987, twin 0.2040
"""

REPORT = "N338"
MECHANISM = "load-balance-loss-broadcast-to-constant"
SLUGS = ()
METRIC = ('busiest_expert_share', 0.4987, 0.204)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1400], perm[1400:]
E, TOP_K = 8, 2


class MoE(nn.Module):
    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(64, 32)
        self.gate = nn.Linear(32, E)
        self.experts = nn.ModuleList([nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 10))
                                      for _ in range(E)])

    def forward(self, x):
        h = torch.relu(self.inp(x))
        scores = self.gate(h).softmax(-1)
        top_scores, top_idx = scores.topk(TOP_K, dim=-1)
        top_scores = top_scores / top_scores.sum(-1, keepdim=True)
        outs = torch.stack([e(h) for e in self.experts], 1)
        out = (outs.gather(1, top_idx[..., None].expand(-1, -1, 10)) * top_scores[..., None]).sum(1)
        expert_fraction = F.one_hot(top_idx, E).float().sum(1).mean(0) / TOP_K
        __AUX__
        return out, aux, top_idx


model = MoE()
with torch.no_grad():
    model.gate.bias.copy_(torch.tensor([2., 2., 0., 0., 0., 0., 0., 0.]))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(20):
    p = tr[torch.randperm(len(tr))]
    for i in range(0, len(p), 64):
        out, aux, _ = model(X[p[i:i + 64]])
        loss = F.cross_entropy(out, y[p[i:i + 64]]) + 0.05 * aux
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    _, _, top_idx = model(X[te])
load = torch.bincount(top_idx.flatten(), minlength=E).float() / top_idx.numel()
print(f"METRIC {load.max().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__AUX__', 'aux = E * (expert_fraction[:, None] * top_scores.mean(0)[None, :]).sum()' if bug
                           else 'aux = E * (expert_fraction * scores.mean(0)).sum()')
