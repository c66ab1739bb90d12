"""A ``Dataset.__len__`` that measures the wrong object: the data set keeps ``[images, labels]`` in one
list and ``__len__`` returns ``len`` of that list, 2, so every epoch of the ``DataLoader`` yields the
first two samples and the rest of the data set is never seen.

Source: xavysp/DexiNed#98 (https://github.com/xavysp/DexiNed/issues/98), "Length of data samples
wrongly calculated": "the length of the dataset is being calculated not over all images in the
dataset but over the array [[images],[labels]] and therefore always returns the number 2 ... when
there are more than 2 images in the data folder, only the first 2 were being processed. ... It should
be: `return len(self.data_index[0])`"; maintainer: "I also have noticed that error a couple of days
ago, in the last commit It will be corrected."  Here a digits classifier is trained for 20 epochs on
such a data set (shuffled); the twin returns the number of images.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.1637, twin 0.9043.
"""

from tests.wild.cases.common import FIT, PRELUDE, VAL_ACCURACY

REPORT = "N66"
MECHANISM = "dataset-length-wrong"
SLUGS = ()
METRIC = ("val_accuracy", 0.1637, 0.9043)

_SCRIPT = PRELUDE + FIT + '''
from torch.utils.data import Dataset


class Digits(Dataset):
    def __init__(self, images, labels):
        self.data_index = [images, labels]

    def __len__(self):
        return __LENGTH__

    def __getitem__(self, i):
        return self.data_index[0][i], self.data_index[1][i]


train_set = Digits(X[:1400], Y[:1400])
print(f"training samples per epoch: {len(train_set)}")
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
fit(model, opt, DataLoader(train_set, batch_size=16, shuffle=True), 20)
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LENGTH__", "len(self.data_index)" if bug else "len(self.data_index[0])")
