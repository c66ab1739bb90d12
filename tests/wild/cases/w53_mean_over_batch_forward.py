"""A "global context" normalisation in ``forward`` that divides by a mean taken over the batch:
each sample is scaled by statistics of the other samples, so accuracy depends on the evaluation
batch size.

Source: xuexingyu24/License_Plate_Detection_Pytorch#22
(https://github.com/xuexingyu24/License_Plate_Detection_Pytorch/issues/22): 95% accuracy at test
batch size 128, 80% at batch size 1, in eval mode; the reporter traced it to ``torch.mean()`` of
``f_pow`` taken over the batch in LPRNet's forward.  Here the network is trained in batches of 64
and evaluated one sample at a time, as an application would call it; the mean energy is taken per
feature over the batch (a scalar mean over the whole tensor, as in LPRNet, moves digits' accuracy
by less than a point, so this reproduction makes the batch statistic per feature); the twin takes
the mean per sample.

Metric: validation accuracy, one sample per forward (plain ``python``, CPU, seed 0):
bug 0.1889, twin 0.8741.
"""

from tests.wild.cases.common import ACCURACY, FIT, PRELUDE

REPORT = "N27"
MECHANISM = "batch-mixed"
SLUGS = ()
METRIC = ("val_accuracy_batch1", 0.1889, 0.8741)

_SCRIPT = PRELUDE + ACCURACY + FIT + '''
class ContextNet(nn.Module):
    """LPRNet-style global context: feature maps of several depths, each scaled by its mean
    energy, concatenated for the classifier."""

    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 64)
        self.head = nn.Linear(64 + 64 + 64, 10)

    def forward(self, x):
        f1 = F.relu(self.fc1(x))
        f2 = F.relu(self.fc2(f1))
        context = []
        for f in (x, f1, f2):
            f_pow = f.pow(2)
            context.append(f / ({mean} + 1e-3))
        return self.head(torch.cat(context, dim=1))


model = ContextNet()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
fit(model, opt, train_loader, 3, loss_fn)
print("val accuracy, batches of 128:", accuracy(model, DataLoader(val_ds, batch_size=128)))
print(f"METRIC {{accuracy(model, DataLoader(val_ds, batch_size=1)):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(mean="f_pow.mean(dim=0, keepdim=True)" if bug else "f_pow.mean(dim=1, keepdim=True)")
