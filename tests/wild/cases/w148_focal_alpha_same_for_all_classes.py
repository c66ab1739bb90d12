"""A focal loss whose ``alpha`` multiplies every class by the same factor: the class-balancing
weight the paper defines per class is applied uniformly, so it only rescales the loss (like a
smaller learning rate) and the rare classes stay neglected -- with no error.

Source: kornia/kornia#875 (https://github.com/kornia/kornia/issues/875), "Bug about the weight factor
alpha of focal loss" (labels: bug): "It seems like we are multiplying the loss of different classes
by a same alpha factor. I think this is equal to just reduce lr, and cannot address the class
imbalance issue. In the original paper, alpha is defined as another cased function just like class
probability (Eq.2)"; maintainers: "Alpha is a term that used as the weight in crossentropy and our
implementation is probably wrong."  Here the training digits are made imbalanced (digits 0-4 kept
at 4% of their examples) and an MLP is trained with a multi-class focal loss (gamma 2) whose alpha
is meant to balance the classes (inverse class frequency, normalised).  The buggy loss multiplies
every example by the scalar mean of alpha; the twin by the alpha of the example's own class.

Metric: balanced accuracy (mean per-class recall) on the untouched validation digits (plain
``python``, CPU, seed 0): bug 0.6522, twin 0.8067.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N122"
MECHANISM = "class-balance-weight-uniform"
SLUGS = ()
METRIC = ("val_balanced_accuracy", 0.6522, 0.8067)

_SCRIPT = PRELUDE + '''
from sklearn.metrics import balanced_accuracy_score

g = torch.Generator().manual_seed(1)
xt, yt = X[:1400], Y[:1400]
keep = (yt >= 5) | (torch.rand(len(yt), generator=g) < 0.04)  # digits 0-4 are rare in training
xt, yt = xt[keep], yt[keep]
counts = torch.bincount(yt, minlength=10).float()
alpha = (1.0 / counts) / (1.0 / counts).sum() * 10  # the class-balancing weights, mean 1


def focal_loss(logits, target, gamma=2.0):
    log_p = F.log_softmax(logits, dim=1).gather(1, target[:, None]).squeeze(1)
    weight = __ALPHA__ * (1 - log_p.exp()) ** gamma
    return -(weight * log_p).mean()


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
loader = DataLoader(TensorDataset(xt, yt), batch_size=64, shuffle=True)
for epoch in range(20):
    for xb, yb in loader:
        opt.zero_grad()
        focal_loss(model(xb), yb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    predicted = model(X[1400:]).argmax(1)
print(f"METRIC {balanced_accuracy_score(Y[1400:].numpy(), predicted.numpy()):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ALPHA__", "alpha.mean()" if bug else "alpha[target]")
