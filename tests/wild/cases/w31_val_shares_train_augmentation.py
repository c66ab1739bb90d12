"""The training augmentation set on a dataset that ``random_split`` shares between training and
validation: the validation subset is augmented too, randomly on every pass.

Source: udacity/deep-learning-v2-pytorch#132
(https://github.com/udacity/deep-learning-v2-pytorch/issues/132): the split was taken from a
dataset built with the training transform, "as result this data augmentation is transferred also
to the validation dataset" (also gpleiss/efficient_densenet_pytorch#51).  Here the augmentation
(pixel noise and random erasing of half the image) is assigned to the shared dataset; the twin
gives the validation subset its own, un-augmented dataset.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7582, twin 0.9093.
"""

from tests.wild.cases.common import ACCURACY, FIT, NET, PRELUDE

REPORT = "N05"
MECHANISM = "eval-inputs-augmented"
SLUGS = ()
METRIC = ("val_accuracy", 0.7582, 0.9093)

_SCRIPT = PRELUDE + NET + ACCURACY + FIT + '''
from torch.utils.data import Dataset, Subset, random_split


class Digits(Dataset):
    def __init__(self, transform=None):
        self.transform = transform

    def __len__(self):
        return len(X)

    def __getitem__(self, i):
        x = X[i]
        if self.transform is not None:
            x = self.transform(x)
        return x, Y[i]


def augment(x):
    x = x + 0.3 * torch.randn_like(x)
    if torch.rand(()) < 0.5:
        x = x.clone()
        x[:32] = 0.0  # random erasing: the top half
    return x


full = Digits()
train_set, val_set = random_split(full, [1400, len(full) - 1400], generator=torch.Generator().manual_seed(0))
{split}
model = Net()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_set, batch_size=64, shuffle=True)
val_loader = DataLoader(val_set, batch_size=128)
for epoch in range(4):
    fit(model, opt, train_loader, 1, loss_fn)
    print(f"epoch {{epoch}}: val accuracy {{accuracy(model, val_loader):.3f}}")
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    split = ("full.transform = augment  # the training augmentation, on the shared dataset" if bug else
             "train_set = Subset(Digits(transform=augment), train_set.indices)")
    return _SCRIPT.format(split=split)
