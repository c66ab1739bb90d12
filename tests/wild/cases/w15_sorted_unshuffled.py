"""Training data sorted by class and loaded without shuffling: each epoch ends on the last classes.

Source: PyTorch forums, "Shuffle issue in DataLoader" threads and Stack Overflow
"Why should the data be shuffled for machine learning tasks" (https://datascience.stackexchange.com/questions/24511);
the digits here are sorted by label, as many on-disk data sets are (one folder per class).
"""

from tests.wild.cases.common import PRELUDE, loop

SLUGS = ("unshuffled-training",)

_SORT = '''
_order = torch.argsort(Y[:1400], stable=True)
train_ds = TensorDataset(X[:1400][_order], Y[:1400][_order])
'''


def script(bug: bool) -> str:
    text = loop().replace(PRELUDE, PRELUDE + _SORT)
    if bug:
        text = text.replace("DataLoader(train_ds, batch_size=64, shuffle=True)", "DataLoader(train_ds, batch_size=64)")
    return text
