"""A focal loss that stores the per-sample class weights it gathers back into its per-class weight attribute:
after the first batch ``alpha`` holds that batch's sample weights, and every later batch gathers its weights from
that vector by class index, so the class weighting becomes whatever the first samples' weights were -- with no
error as long as a batch has at least as many samples as there are classes.

Source: yatengLG/Focal-Loss-Pytorch#5 (https://github.com/yatengLG/Focal-Loss-Pytorch/issues/5): the loss did
``self.alpha = self.alpha.gather(0, labels.view(-1))``; the reporter: "因为上一阶段self.alpha被赋值后self.alpha数值变了。
gather后的结果就会有问题" (after the previous step assigned self.alpha its values changed, so the gathered result is
wrong), and a larger later batch raises "Invalid index in gather"; suggested fix ``alpha = self.alpha.gather(...)``
(reported again in #9 and #14; closed). Here a two-class problem with 5% positives and overlapping classes is
trained with a focal loss (gamma 2, alpha 0.1 for the negatives and 0.9 for the positives) and batches of 64; the
bug writes the gathered weights back into ``self.alpha``, the twin keeps them local. The repository's multi-class
detection setting is replaced by the binary classifier.

Metric: test balanced accuracy (mean of the two classes' recalls) (plain ``python``, CPU, seed 0): bug 0.6250,
twin 0.8175
"""

REPORT = "N301"
MECHANISM = "class-weights-overwritten-by-batch-gather"
SLUGS = ()
METRIC = ("test_balanced_accuracy", 0.6250, 0.8175)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def batch(n):
    y = (torch.rand(n) < 0.05).long()
    x = torch.randn(n, 2) + y[:, None] * torch.tensor([1.5, 1.0])
    return x, y


class FocalLoss(nn.Module):
    def __init__(self, alpha, gamma=2.0):
        super().__init__()
        self.alpha = torch.tensor(alpha)
        self.gamma = gamma

    def forward(self, logits, labels):
        logp = F.log_softmax(logits, 1).gather(1, labels.view(-1, 1)).squeeze(1)
        p = logp.exp()
        __GATHER__
        return -(alpha * (1 - p) ** self.gamma * logp).mean()


model = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
criterion = FocalLoss([0.1, 0.9])
#@guard
for step in range(400):
    x, y = batch(64)
    loss = criterion(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, y = batch(20000)
    pred = model(x).argmax(1)
    recall = [(pred[y == c] == c).float().mean().item() for c in (0, 1)]
print(f"METRIC {sum(recall) / 2:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__GATHER__', """self.alpha = self.alpha.gather(0, labels.view(-1))
        alpha = self.alpha""" if bug else 'alpha = self.alpha.gather(0, labels.view(-1))')
