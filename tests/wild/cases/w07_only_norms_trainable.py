"""Every weight frozen except the normalisation layers: the model barely learns.

Source: PyTorch forums, "Obtaining abnormal changes in loss and accuracy"
(https://discuss.pytorch.org/t/obtaining-abnormal-changes-in-loss-and-accuracy/84911), TrainCheck's
``pytorch-forum-84911``: a loop freezes every parameter whose name lacks "bn", then the classifier
too, so only BatchNorm's scale and shift train.  Here an MLP with BatchNorm on digits, frozen the
same way (the twin freezes nothing).
"""

import torch
from torch import nn

from tests.wild.cases.common import digits_sets, loop

SLUGS = ("weights-frozen",)

_NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.bn1 = nn.BatchNorm1d(64)
        self.fc2 = nn.Linear(64, 64)
        self.bn2 = nn.BatchNorm1d(64)
        self.fc = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.bn1(self.fc1(x)))
        return self.fc(F.relu(self.bn2(self.fc2(x))))
'''

_FREEZE = '''
model = Net()
for name, param in model.named_parameters():
    if "bn" not in name:
        param.requires_grad = False
for param in model.fc.parameters():
    param.requires_grad = False
opt = torch.optim.SGD(filter(lambda p: p.requires_grad, model.parameters()), lr=0.1)
'''


def script(bug: bool) -> str:
    text = loop(net=_NET)
    if bug:
        text = text.replace("model = Net()\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n", _FREEZE)
    return text


def setup(bug: bool) -> dict:
    model = nn.Sequential(nn.Linear(64, 64), nn.BatchNorm1d(64), nn.ReLU(), nn.Linear(64, 64), nn.BatchNorm1d(64),
                          nn.ReLU(), nn.Linear(64, 10))
    if bug:
        for m in model:
            if not isinstance(m, nn.BatchNorm1d):
                for p in m.parameters():
                    p.requires_grad = False
    train, val = digits_sets()
    params = [p for p in model.parameters() if p.requires_grad]
    return dict(model=model, optimizer=torch.optim.SGD(params, lr=0.1), loss_fn=nn.CrossEntropyLoss(),
                train_data=train, val_data=val)
