"""Training data sorted by class and loaded without shuffling: each epoch ends on the last classes.

Source: Deci-AI/super-gradients#416 (https://github.com/Deci-AI/super-gradients/issues/416: the default
loader did not shuffle, so ImageNet training saw one class at a time) and open-mmlab/mmdetection#1649
(https://github.com/open-mmlab/mmdetection/issues/1649); the digits here are sorted by label, as many
on-disk data sets are (one folder per class).
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
