"""A keep probability passed where ``nn.Dropout`` expects the drop probability:
``dropout_keep_prob=1`` becomes ``p=1``, so every unit is dropped in training and the layers
before the dropout never receive a gradient.

Source: hassony2/kinetics_i3d_pytorch#6 (https://github.com/hassony2/kinetics_i3d_pytorch/issues/6):
"it says dropout_keep_prob=1 but in the PyTorch documentation p is the probability of an element
to be zeroed"; fixed by the maintainer (also piergiaj/pytorch-i3d#58).  The twin passes
``p=1 - dropout_keep_prob``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.0831, twin 0.8665.
"""

from tests.wild.cases.common import ACCURACY, FIT, PRELUDE

REPORT = "N25"
MECHANISM = "dropout-drops-all"
SLUGS = ()
METRIC = ("val_accuracy", 0.0831, 0.8665)

_SCRIPT = PRELUDE + ACCURACY + FIT + '''
class I3DHead(nn.Module):
    def __init__(self, dropout_keep_prob=1.0):
        super().__init__()
        self.features = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
        self.dropout = nn.Dropout({p})
        self.logits = nn.Linear(64, 10)

    def forward(self, x):
        return self.logits(self.dropout(self.features(x)))


model = I3DHead()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
fit(model, opt, train_loader, 3, loss_fn)
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(p="dropout_keep_prob" if bug else "1 - dropout_keep_prob")
