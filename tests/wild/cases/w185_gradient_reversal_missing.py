"""Domain-adversarial training without its gradient reversal layer: the domain classifier's loss flows
back into the feature extractor unreversed, so the features are trained to tell the source scanner
from the target one instead of hiding the difference, and the label classifier transfers badly to the
target domain -- with no error and every loss going down.

Source: zou-longkun/GAST#3 (https://github.com/zou-longkun/GAST/issues/3), "About gradient reverse
layer": "Did you miss adding gradient reverse layer in your code (.../Models_Norm.py#L349)?"; maintainer:
"Thanks for reminding, I have already added gradient reverse layer in Model_Norm.py".  (GAST adapts
point-cloud classifiers; here DANN adapts a digits classifier.)  Labelled source digits and unlabelled
target digits (another "scanner": dimmed, with a fixed per-pixel offset) train a feature extractor, a
label classifier on the source and a domain head on both.  The buggy ``to_domain_head`` returns the
features as they are, the twin ``GradientReversal.apply(h, 1.0)``.

Metric: accuracy on the target-domain digits (plain ``python``, CPU, seed 0): bug 0.311, twin 0.6734
"""

REPORT = "N159"
MECHANISM = "gradient-reversal-missing"
SLUGS = ()
METRIC = ("target_accuracy", 0.311, 0.6734)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
x_src, y_src = X[:900], Y[:900]  # labelled source scans
shift = torch.randn(64, generator=torch.Generator().manual_seed(2))
x_tgt, y_tgt = X[900:] * 0.7 + 0.6 * shift.clamp(min=0), Y[900:]  # another scanner: unlabelled in training


class GradientReversal(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, lam):
        ctx.lam = lam
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return -ctx.lam * grad, None


features = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 32), nn.ReLU())
classifier = nn.Linear(32, 10)
domain_head = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 1))


def to_domain_head(h):
    return __GRL__


model = nn.ModuleList([features, classifier, domain_head])
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    perm_s, perm_t = torch.randperm(len(x_src)), torch.randperm(len(x_tgt))
    for i in range(0, 896, 64):
        xs, ys, xt = x_src[perm_s[i:i + 64]], y_src[perm_s[i:i + 64]], x_tgt[perm_t[i:i + 64]]
        hs, ht = features(xs), features(xt)
        dom_logits = domain_head(to_domain_head(torch.cat([hs, ht]))).squeeze(1)
        dom_labels = torch.cat([torch.zeros(len(hs)), torch.ones(len(ht))])
        loss = F.cross_entropy(classifier(hs), ys) + F.binary_cross_entropy_with_logits(dom_logits, dom_labels)
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (classifier(features(x_tgt)).argmax(1) == y_tgt).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__GRL__", "h" if bug else "GradientReversal.apply(h, 1.0)")
