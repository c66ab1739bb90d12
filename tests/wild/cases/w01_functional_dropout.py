"""Dropout applied with ``F.dropout(x, p)`` in ``forward``: always on, in validation too.

Source: Stack Overflow, "Using Dropout in Pytorch: nn.Dropout vs. F.dropout"
(https://stackoverflow.com/questions/53419474, answer https://stackoverflow.com/a/53452827), whose example -- a model calling the functional
dropout in ``forward`` -- keeps zeroing activations after ``model.eval()``; retold at
http://iopenv.com/V26QIRRJF/The-difference-between-torch-nn-dropout-and-torch-nn-F-dropout-in-pytorch.
``F.dropout``'s ``training`` argument defaults to True, so without ``training=self.training``
the model's mode never reaches it.
"""

import torch
from torch import nn

from tests.wild.cases.common import NET, digits_sets, loop

SLUGS = ("dropout-always-on", "train-mode-in-eval")  # the doctor's validation probe: outputs differ in eval mode

_FORWARD = "self.fc2(F.dropout(F.relu(self.fc1(x)), 0.3{arg}))"


def _net(bug: bool) -> str:
    arg = "" if bug else ", training=self.training"
    return NET.replace("self.fc2(self.drop(F.relu(self.fc1(x))))", _FORWARD.format(arg=arg))


def script(bug: bool) -> str:
    return loop(net=_net(bug))


def setup(bug: bool) -> dict:
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(64, 64), nn.Linear(64, 10)

        def forward(self, x):
            h = F.relu(self.fc1(x))
            return self.fc2(F.dropout(h, 0.3) if bug else F.dropout(h, 0.3, training=self.training))

    model = Net()
    train, val = digits_sets()
    return dict(model=model, optimizer=torch.optim.SGD(model.parameters(), lr=0.1), loss_fn=nn.CrossEntropyLoss(),
                train_data=train, val_data=val)
