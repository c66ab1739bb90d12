"""An out-of-distribution score summed over 100 classes (values of 20 to 50) handed to ``binary_auroc``, which
treats any input outside [0, 1] as logits and applies a sigmoid: in float32 every score becomes exactly 1.0, the
ranking collapses into one tie and the reported AUROC is 0.5 whatever the detector does -- no warning, no error.

Source: kkirchheim/pytorch-ood#144 (https://github.com/kkirchheim/pytorch-ood/pull/144), "Fix GEN score saturating
AUROC to ~0.5 on many-class datasets": "`GEN.score` summed the power-transform term over all classes (per the
paper), reaching magnitudes of ~20-50 for 100-class datasets like CIFAR-100. `OODMetrics` computes AUROC via
torchmetrics' `binary_auroc`, which silently applies `sigmoid()` to any score outside `[0, 1]`; at that magnitude
`sigmoid()` saturates to `1.0` in float32 for virtually every sample, collapsing the ranking (observed AUROC ~50
instead of ~80 on CIFAR-100 OpenOOD). Changed `sum` to `mean`" (merged). Here an MLP classifies 100 Gaussian
classes in 32 dimensions; samples of 50 unseen classes are the OOD set; the generalised-entropy score
``sum(p ** 0.1 * (1 - p) ** 0.1)`` (the bug) or its mean over classes (the twin) is scored with torchmetrics'
``binary_auroc``. The reproduction departs from the report in the data (synthetic Gaussian classes instead of
CIFAR-100 and OpenOOD) and the classifier (an MLP instead of a ResNet).

Metric: OOD AUROC (plain ``python``, CPU, seed 0): bug 0.5000, twin 0.9899
"""

REPORT = "N445"
MECHANISM = "score-outside-unit-interval-squashed-by-metric"
SLUGS = ()
METRIC = ("ood_auroc", 0.5000, 0.9899)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from torchmetrics.functional.classification import binary_auroc

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
N_CLASSES, DIM = 100, 32
centres = torch.randn(N_CLASSES + 50, DIM, generator=g) * 1.5


def sample(classes, per_class):
    y = classes.repeat_interleave(per_class)
    x = centres[y] + torch.randn(len(y), DIM, generator=g)
    return x, y


x_train, y_train = sample(torch.arange(N_CLASSES), 40)
x_test, _ = sample(torch.arange(N_CLASSES), 10)
x_ood, _ = sample(torch.arange(N_CLASSES, N_CLASSES + 50), 20)

model = nn.Sequential(nn.Linear(DIM, 128), nn.ReLU(), nn.Linear(128, N_CLASSES))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(15):
    perm = torch.randperm(len(x_train))
    for i in range(0, len(perm), 128):
        idx = perm[i:i + 128]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()


def gen_score(logits, gamma=0.1):
    """Generalised-entropy OOD score (higher means more out-of-distribution)."""
    p = logits.softmax(dim=-1)
    terms = p ** gamma * (1 - p) ** gamma
    return __REDUCE__


model.eval()
with torch.no_grad():
    scores = torch.cat([gen_score(model(x_test)), gen_score(model(x_ood))])
is_ood = torch.cat([torch.zeros(len(x_test)), torch.ones(len(x_ood))]).long()
auroc = binary_auroc(scores, is_ood).item()
print(f"METRIC {auroc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__REDUCE__", "terms.sum(dim=-1)" if bug else "terms.mean(dim=-1)")
