"""``F.dropout(x, p, training=True)`` hard-coded in ``forward``: dropout in every evaluation.

Source: the same question (https://stackoverflow.com/questions/53419474, answer https://stackoverflow.com/a/53452827), whose "Model 1"
passes ``training=True`` explicitly; a pattern copied into many repositories (the Chinese-language
write-ups at https://e-com-net.com/article/1601294049287897088.htm and
https://geekdaxue.co/read/myheros@iegk5l/swg1v0 show the eval-mode outputs still randomly zeroed).
"""

import torch
from torch import nn

from tests.wild.cases.common import NET, digits_sets, loop

SLUGS = ("dropout-always-on", "train-mode-in-eval")  # the doctor's validation probe: outputs differ in eval mode


def script(bug: bool) -> str:
    arg = "training=True" if bug else "training=self.training"
    net = NET.replace("self.fc2(self.drop(F.relu(self.fc1(x))))",
                      f"self.fc2(F.dropout(F.relu(self.fc1(x)), p=0.25, {arg}))")
    return loop(net=net)


def setup(bug: bool) -> dict:
    import torch.nn.functional as F

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(64, 64), nn.Linear(64, 10)

        def forward(self, x):
            return self.fc2(F.dropout(F.relu(self.fc1(x)), p=0.25, training=True if bug else self.training))

    model = Net()
    train, val = digits_sets()
    return dict(model=model, optimizer=torch.optim.Adam(model.parameters(), lr=1e-3),
                loss_fn=nn.CrossEntropyLoss(), train_data=train, val_data=val)
