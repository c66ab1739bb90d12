"""A validation set drawn from the training set: validation measures memorisation.

Source: robopose issue #3 (https://github.com/yannlabb/robopose/issues/3): the validation
sampler picks 10% of the *training* indices, so most validation ids are also training ids;
the same leak in data sets: fashion-mnist #44 (https://github.com/zalandoresearch/fashion-mnist/issues/44).
Here the validation set is a random 20% of the training samples (as in the report).
"""

import torch
from torch import nn

from tests.wild.cases.common import PRELUDE, digits_sets, loop

SLUGS = ("val-overlaps-train",)

_SPLIT = '''
_pick = torch.randperm(1400, generator=torch.Generator().manual_seed(1))[:280]
val_ds = TensorDataset(X[_pick], Y[_pick])
'''


def script(bug: bool) -> str:
    text = loop()
    return text.replace(PRELUDE, PRELUDE + _SPLIT) if bug else text


def setup(bug: bool) -> dict:
    from torch.utils.data import Subset

    train, val = digits_sets()
    if bug:
        pick = torch.randperm(len(train), generator=torch.Generator().manual_seed(1))[:280].tolist()
        val = Subset(train, pick)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    return dict(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=nn.CrossEntropyLoss(),
                train_data=train, val_data=val)
