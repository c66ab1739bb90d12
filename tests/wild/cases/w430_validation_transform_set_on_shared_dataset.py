"""A validation transform set through ``Subset.dataset``: ``random_split`` returns two subsets of one data set, so
switching the validation subset's transform off switches it off for the training subset too, and the model trains
on unaugmented images while the run reads as augmented -- nothing fails.

Source: growingnet/gromo#58 (https://github.com/growingnet/gromo/pull/58), "fix: data augmentation": "the way
data augmentation is set on the validation set erases the augmentation set for the training set because
train_dataset and val_dataset are instances of a `Subset` class, which points to the same dataset ... Currently,
as we do not apply augmentation on the validation set, this means that the augmentation was not applied to the
training set" (labels: bug; merged; a reviewer: "Thank you for the bug fix ! Definitely a well hidden one"). Here a
data set of 1400 digits with a random-shift augmentation is split into 300 for training and 1100 for validation,
the validation subset's transform is set to ``None`` through ``val_set.dataset``, an MLP is trained on the training
subset, and it is tested on the held-out digits shifted at random (the variation the augmentation is there for);
the twin gives validation its own data set object, so the training subset keeps its augmentation. The
reproduction replaces the repository's growing networks and image data by an MLP on the digits.

Metric: test accuracy on shifted digits (plain ``python``, CPU, seed 0): bug 0.4509, twin 0.6851
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N404"
MECHANISM = "validation-transform-set-on-shared-dataset"
SLUGS = ()
METRIC = ("test_accuracy", 0.4509, 0.6851)

_SCRIPT = PRELUDE + '''
from torch.utils.data import Dataset, Subset, random_split


def shift(x):
    img = x.view(8, 8)
    dy, dx = torch.randint(-1, 2, (2,)).tolist()
    img = torch.roll(img, (dy, dx), (0, 1))
    if dy == 1:
        img[0] = 0
    if dy == -1:
        img[-1] = 0
    if dx == 1:
        img[:, 0] = 0
    if dx == -1:
        img[:, -1] = 0
    return img.reshape(64)


class Digits(Dataset):
    def __init__(self, x, y, transform=None):
        self.x, self.y, self.transform = x, y, transform

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        x = self.x[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, self.y[i]


full = Digits(X[:1400], Y[:1400], transform=shift)
train_set, val_set = random_split(full, [300, 1100], generator=torch.Generator().manual_seed(0))
__VAL__
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
loader = DataLoader(train_set, batch_size=32, shuffle=True)
for epoch in range(60):
    for xb, yb in loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
test_x = torch.stack([shift(x) for x in X[1400:]])
with torch.no_grad():
    acc = (model(test_x).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "val_set.dataset.transform = None"
_FIX = "val_set = Subset(Digits(X[:1400], Y[:1400], transform=None), val_set.indices)"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__VAL__", _BUG if bug else _FIX)
