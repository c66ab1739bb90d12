"""A soft Dice loss fed raw logits instead of probabilities: with logits of either sign the
denominator ``sum(x) + sum(t)`` can approach zero or cross it, the "loss" explodes or changes sign,
and its gradient swamps the BCE term it is added to.  Training runs; the segmentation is poor.

Source: ScrollPrize/villa#1488 (https://github.com/ScrollPrize/villa/issues/1488), "standalone path
defaults apply_nonlin=None: raw logits explode dice to ~1e13 and erase BCE gradients early in
training": "the dice loss consumes **raw logits as if they were probabilities**. In the early-training
regime where mean logit drifts slightly negative, the dice denominator crosses zero and the loss
explodes to ~1e12–1e13 with sign flips — and because the exploded term dominates the combined
gradient, **BCE supervision is effectively erased** ... 2 of 4 runs never escaped the bad regime's
basin"; fixed by ScrollPrize/villa#1644 ("must consume probabilities, not raw logits").  Here a small
convolutional network segments the ink of noisy digits (15% foreground) with ``BCEWithLogitsLoss +
SoftDice``; the buggy script hands the Dice term the logits, the twin ``sigmoid(logits)``.

Metric: foreground IoU on the validation digits (plain ``python``, CPU, seed 0): bug 0, twin 0.6159.
"""

REPORT = "N75"
MECHANISM = "probability-loss-on-logits"
SLUGS = ()
METRIC = ("val_iou", 0.0, 0.6159)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
digits = load_digits()
clean = torch.tensor(digits.data, dtype=torch.float32).view(-1, 1, 8, 8) / 16.0
masks = (clean > 0.75).float()
g = torch.Generator().manual_seed(1)
images = clean + 0.3 * torch.randn(clean.shape, generator=g)


def soft_dice(x, target, smooth=1.0):
    inter = (x * target).sum()
    return 1 - (2 * inter + smooth) / (x.sum() + target.sum() + smooth)


model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv2d(16, 16, 3, padding=1), nn.ReLU(),
                      nn.Conv2d(16, 1, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
loader = DataLoader(TensorDataset(images[:1400], masks[:1400]), batch_size=32, shuffle=True)
for epoch in range(4):
    for xb, mb in loader:
        logits = model(xb)
        loss = F.binary_cross_entropy_with_logits(logits, mb) + soft_dice(__DICE_INPUT__, mb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.3g}")

model.eval()
with torch.no_grad():
    pred = model(images[1400:]) > 0
    truth = masks[1400:] > 0
    iou = ((pred & truth).sum() / (pred | truth).sum()).item()
print(f"METRIC {iou:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DICE_INPUT__", "logits" if bug else "torch.sigmoid(logits)")
