"""A last training batch of one sample through BatchNorm in training mode.

Source: pytorch/pytorch#4534 (https://github.com/pytorch/pytorch/issues/4534) and fastai#1352
(https://github.com/fastai/fastai/issues/1352): a data set whose size leaves one sample in the
last batch; with batch size 1 BatchNorm raises, with 2 or 3 it silently normalises with noise.
Here 1402 samples in batches of 50 leave a last batch of 2 (a batch of 1 would raise, which is
not silent); the twin drops the last batch.
"""

from tests.wild.cases.common import PRELUDE, loop

SLUGS = ("batchnorm-tiny-batch",)

_NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.bn = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.bn(self.fc1(x))))
'''


def script(bug: bool) -> str:
    text = loop(net=_NET).replace(PRELUDE, PRELUDE + "train_ds = TensorDataset(X[:1402], Y[:1402])\n")
    loader = "DataLoader(train_ds, batch_size=50, shuffle=True{})".format("" if bug else ", drop_last=True")
    text = text.replace("DataLoader(train_ds, batch_size=64, shuffle=True)", loader)
    return text
