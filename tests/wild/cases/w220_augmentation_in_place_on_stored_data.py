"""A dataset that normalises and augments its sample in place on the stored array: ``__getitem__`` takes a
view of the loaded data and edits it, so every epoch normalises the already normalised images again, the
training set drifts further from the test set each time it is read, and the model stops learning -- with
no error.

Source: facebookresearch/pycls#21 (https://github.com/facebookresearch/pycls/pull/21), "Fixed Cifar10 dataset
__getitem__ transformations modifying loaded data permanently": "The CIFAR10 dataset class has been
performing data augmentation in place, causing each call to ``__getitem__`` ... to modify the loaded dataset
permanently. I believe this was going unnoticed because with the default settings the data loader spawns new
processes at least once an epoch and passes a copy of the original, unmodified dataset to each ... setting
the config parameter ``DATA_LOADER.NUM_WORKERS=0`` causes the model to fail to train after ~3 epochs. Making
a copy of the selected data in ``__getitem__`` fixes the problem"; maintainer: "Thank you for noticing it and
for the PR!".  Here the digits are held as a tensor; ``__getitem__`` subtracts the mean, divides by the
standard deviation and flips half the samples, in place, and the loader reads in the main process.  The
buggy item is ``self.x[i]`` (a view), the twin's ``self.x[i].clone()``.

Metric: test accuracy after 8 epochs (plain ``python``, CPU, seed 0): bug 0.0982, twin 0.8161
"""

REPORT = "N194"
MECHANISM = "augmentation-writes-into-stored-dataset"
SLUGS = ()
METRIC = ("test_accuracy", 0.0982, 0.8161)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch.utils.data import DataLoader, Dataset

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32).view(-1, 8, 8) / 16.0
Y = torch.tensor(d.target)
MEAN, STD = X[:1400].mean().item(), X[:1400].std().item()


class Digits(Dataset):
    def __init__(self, x, y, train):
        self.x, self.y, self.train = x.clone(), y, train

    def __len__(self):
        return len(self.y)

    def __getitem__(self, i):
        img = __ITEM__
        img.sub_(MEAN).div_(STD)
        if self.train and torch.rand(()) < 0.5:
            img.copy_(img.flip(-1))
        return img.reshape(64), self.y[i]


train_loader = DataLoader(Digits(X[:1400], Y[:1400], True), batch_size=64, shuffle=True, num_workers=0)
test_loader = DataLoader(Digits(X[1400:], Y[1400:], False), batch_size=256)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
#@guard
for epoch in range(8):
    for xb, yb in train_loader:
        loss = F.cross_entropy(model(xb), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()

correct = 0
with torch.no_grad():
    for xb, yb in test_loader:
        correct += (model(xb).argmax(1) == yb).sum().item()
print(f"METRIC {correct / 397:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ITEM__", "self.x[i]" if bug else "self.x[i].clone()")
