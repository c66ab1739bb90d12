"""A sigmoid focal loss whose negative term is modulated by ``(1 - P) ** gamma`` instead of ``P ** gamma``: the
down-weighting meant for easy negatives falls on the hard ones, and a negative's loss vanishes as its score
goes to 1, so nothing stops the model from scoring every candidate high -- with no error.

Source: yqyao/SSD_Pytorch#32 (https://github.com/yqyao/SSD_Pytorch/issues/32), "sigmiod focal loss": "sigmoid
focal loss implement seems not right. origin code: `loss_neg = -1. * torch.pow(1 - P, self.gamma) *
torch.log(1 - P) * (1 - targets) * (1 - alpha_mask)` but according to paper, I think it should be: `loss_neg
= -1. * torch.pow(P, self.gamma) * torch.log(1 - P) * (1 - targets) * (1 - alpha_mask)`"; maintainer: "Yes,
you are right. Thank you very much."  Here an MLP scores noisy scikit-learn digits for one class (a 3 among
ten, the detector's foreground among the background) with the repository's loss written out (gamma 2, alpha
0.25, normalised by the number of positives); the buggy negative term uses ``1 - P``, the twin ``P``.  SSD
applies the loss to anchors of a detector; a classifier of image crops stands in for the anchors.

Metric: test average precision for the class (plain ``python``, CPU, seed 0): bug 0.1075, twin 0.7980
"""

REPORT = "N245"
MECHANISM = "focal-negative-modulation-inverted"
SLUGS = ()
METRIC = ("test_ap", 0.1075, 0.7980)

_SCRIPT = '''import torch
from torch import nn
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
X = X + 0.3 * torch.randn_like(X)
Y = (torch.tensor(d.target) == 3).float()
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]


class SigmoidFocalLoss(nn.Module):
    def __init__(self, gamma=2.0, alpha=0.25):
        super().__init__()
        self.gamma, self.alpha = gamma, alpha

    def forward(self, logits, targets):
        P = torch.sigmoid(logits).clamp(1e-6, 1 - 1e-6)
        alpha_mask = self.alpha * targets
        loss_pos = -1. * torch.pow(1 - P, self.gamma) * torch.log(P) * targets * alpha_mask
        loss_neg = -1. * torch.pow(__NEG__, self.gamma) * torch.log(1 - P) * (1 - targets) * (1 - alpha_mask)
        return (loss_pos + loss_neg).sum() / targets.sum().clamp(min=1)


model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
criterion = SigmoidFocalLoss()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(Xtr), (128,))
    loss = criterion(model(Xtr[i]).squeeze(1), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    score = torch.sigmoid(model(Xte).squeeze(1))
order = score.argsort(descending=True)
hits = Yte[order]
precision = hits.cumsum(0) / torch.arange(1, len(hits) + 1)
ap = (precision * hits).sum() / hits.sum()
print(f"METRIC {ap.item():.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__NEG__', '1 - P' if bug else 'P')
    return s
