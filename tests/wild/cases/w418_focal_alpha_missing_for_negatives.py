"""A binary focal loss that weights the positives by ``alpha`` and leaves the negatives at 1 instead of ``1 - alpha``:
the class balance the user asks for is not applied (with ``alpha`` 0.9 the positives weigh 0.9 against the
negatives' 1 instead of 9 to 1), and a rare positive class stays under-detected -- nothing fails.

Source: mathiaszinnen/focal_loss_torch#2 (https://github.com/mathiaszinnen/focal_loss_torch/issues/2), "Shouldn't
there be a `(1-alpha)` pre-factor for the negatives?": "I believe `fl = torch.where(target == 1, fl * self.alpha,
fl)` should be `fl = torch.where(target == 1, fl * self.alpha, fl * (1 - self.alpha))`. From the paper section 3.1:
A common method for addressing class imbalance is to introduce a weighting factor α ∈ [0, 1] for class 1 and 1−α for
class −1"; maintainer: "I changed the code accordingly, thanks for bringing it up!" Here a linear classifier learns
to tell the digit 8 from the others (a tenth are positives) with a focal loss (gamma 2, alpha 0.9) written like the
repository's, and the balanced accuracy of the test digits is measured at threshold 0.5; the bug leaves the
negatives unweighted, the twin weights them by ``1 - alpha``, as the fix does. The reproduction replaces the
repository's multi-class users by a binary digit task.

Metric: test balanced accuracy (plain ``python``, CPU, seed 0): bug 0.7096, twin 0.8329
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N392"
MECHANISM = "focal-alpha-missing-for-negatives"
SLUGS = ()
METRIC = ("test_balanced_accuracy", 0.7096, 0.8329)

_SCRIPT = PRELUDE + '''
ALPHA, GAMMA = 0.9, 2.0
target = (Y == 8).float()


def focal_loss(logits, target):
    p = torch.sigmoid(logits)
    ce = F.binary_cross_entropy_with_logits(logits, target, reduction="none")
    p_t = torch.where(target == 1, p, 1 - p)
    fl = (1 - p_t) ** GAMMA * ce
__ALPHA__
    return fl.mean()


model = nn.Linear(64, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.5)
#@guard
for epoch in range(10):
    for i in torch.randperm(1400).split(64):
        loss = focal_loss(model(X[i]).squeeze(1), target[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    pred = (model(X[1400:]).squeeze(1) > 0).float()
t = target[1400:]
recall_pos = (pred[t == 1] == 1).float().mean().item()
recall_neg = (pred[t == 0] == 0).float().mean().item()
print(f"METRIC {(recall_pos + recall_neg) / 2:.4f}")
'''

_BUG = "    fl = torch.where(target == 1, fl * ALPHA, fl)"
_FIX = "    fl = torch.where(target == 1, fl * ALPHA, fl * (1 - ALPHA))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ALPHA__", _BUG if bug else _FIX)
