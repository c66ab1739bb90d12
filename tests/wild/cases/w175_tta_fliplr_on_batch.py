"""Test-time augmentation that mirrors a batch with ``torch.fliplr``: on a batch of images shaped
(N, H, W) ``fliplr`` reverses dimension 1, the rows, so each validation image is averaged with its
upside-down copy -- an orientation the model never saw -- instead of its mirror image, and the
ensemble is worse than no augmentation at all, with no error.

Source: libffcv/ffcv#213 (https://github.com/libffcv/ffcv/pull/213), "Fix bug in cifar-10 example
training script; takes accuracy ~92.5% -> ~94%": "It turns out that ``torch.fliplr`` isn't behaving as
desired on batches of images, in particular it is causing a vertical rather than horizontal flip.
Fixing this bug improves the accuracy with TTA to ~94%" (merged; maintainer: "thanks!").  Here an MLP
learns the digits (grey 8x8 images without a channel axis) with random horizontal flips, and
evaluation averages the logits of each image and its mirror image; the buggy script mirrors with
``torch.fliplr(images)``, the twin with ``images.flip(-1)``.  (The report's batches are CIFAR-10
images; the digits stand in for them.)

Metric: validation accuracy with test-time augmentation (plain ``python``, CPU, seed 0): bug 0.6171,
twin 0.869
"""

REPORT = "N149"
MECHANISM = "batch-flip-on-wrong-axis"
SLUGS = ()
METRIC = ("tta_val_accuracy", 0.6171, 0.869)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.images, dtype=torch.float32) / 16.0  # (N, 8, 8): one grey channel, no channel axis
Y = torch.tensor(d.target)
x_train, y_train, x_val, y_val = X[:1400], Y[:1400], X[1400:], Y[1400:]

model = nn.Sequential(nn.Flatten(), nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 64):
        idx = perm[i:i + 64]
        xb, yb = x_train[idx], y_train[idx]
        flip = torch.rand(len(xb)) < 0.5  # random horizontal flips: the model sees both orientations
        xb = torch.where(flip[:, None, None], xb.flip(-1), xb)
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()


def mirrored(images):
    return __FLIP__


model.eval()
with torch.no_grad():  # test-time augmentation: average the logits of each image and its mirror image
    logits = model(x_val) + model(mirrored(x_val))
    acc = (logits.argmax(1) == y_val).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FLIP__", "torch.fliplr(images)" if bug else "images.flip(-1)")
