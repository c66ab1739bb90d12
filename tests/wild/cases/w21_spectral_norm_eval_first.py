"""A spectral-normalised layer evaluated before any training-mode forward: its weight is not
normalised yet, so the "initial quality" measured in eval mode is wrong.

Source: pytorch/pytorch#51800 (https://github.com/pytorch/pytorch/issues/51800), TrainCheck's
``pytorch-51800``: ``spectral_norm`` runs its power iteration only in training-mode forwards, so
an eval-mode forward straight after construction uses an unconverged estimate of sigma.
The script measures the untrained model's validation accuracy in eval mode, then trains; the twin
runs one training-mode forward (under no_grad) before that first evaluation.
"""

from tests.wild.cases.common import loop

SLUGS = ("spectral-norm-uninitialised",)

_NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.utils.spectral_norm(nn.Linear(64, 64))
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))
'''

_FIRST = '''
{warm}model.eval()
with torch.no_grad():
    first = sum((model(xb).argmax(1) == yb).sum().item() for xb, yb in val_loader)
model.train()
print("untrained val accuracy", first / len(val_ds))
'''


def script(bug: bool) -> str:
    warm = "" if bug else "with torch.no_grad():\n    model(X[:64])  # one training-mode forward sets up the power iteration\n"
    text = loop(net=_NET)
    return text.replace("#@guard\n", "#@guard\n" + _FIRST.format(warm=warm))
