"""An early-stopping helper that saves the checkpoint every epoch, whatever the validation loss did, and never
counts epochs without improvement: the checkpoint loaded for testing is the last epoch's, not the best, and training
never stops early -- an overfitting run is tested at its most overfitted point, with no error (the log still prints
"Validation loss decreased").

Source: TROUBADOUR000/TimeFilter#5 (https://github.com/TROUBADOUR000/TimeFilter/issues/5), "Bug in EarlyStopping:
model checkpoint is saved even when validation loss increases": "the model checkpoint is saved **unconditionally**
every epoch. The logic that compares ``val_loss`` with the previous best (``val_loss_min``) and increments the
patience counter is commented out", with the log line "Validation loss decreased (0.702421 --> 0.713448). Saving
model ..." (closed; no maintainer comment in what the search returned). Here a wide MLP is trained full-batch on
40 noisy samples of a smooth function for up to 300 epochs with an ``EarlyStopping`` object written like the
repository's (patience 10, ``checkpoint.pth``), and the checkpoint is loaded for the test; the bug's ``__call__``
saves every epoch and never stops, the twin's saves on improvement and stops after 10 epochs without one.
TimeFilter's forecasting model and data loaders are replaced by the regression.

Metric: test mean squared error of the loaded checkpoint, lower is better (plain ``python``, CPU, seed 0): bug
0.0329, twin 0.0163
"""

REPORT = "N306"
MECHANISM = "checkpoint-saved-without-comparing-to-best"
SLUGS = ()
METRIC = ("test_mse", 0.0329, 0.0163)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)


def data(n):
    x = torch.rand(n, 1) * 4 - 2
    return x, torch.sin(2 * x) + 0.3 * torch.randn(n, 1)


class EarlyStopping:
    def __init__(self, patience):
        self.patience = patience
        self.counter = 0
        self.val_loss_min = float("inf")
        self.early_stop = False

    def __call__(self, val_loss, model, path):
        __CALL__

    def save_checkpoint(self, val_loss, model, path):
        torch.save(model.state_dict(), path)
        self.val_loss_min = val_loss


x, y = data(40)
xv, yv = data(40)
model = nn.Sequential(nn.Linear(1, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
stopper = EarlyStopping(patience=10)
#@guard
for epoch in range(300):
    loss = F.mse_loss(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    with torch.no_grad():
        val = F.mse_loss(model(xv), yv).item()
    stopper(val, model, "checkpoint.pth")
    if stopper.early_stop:
        break
model.load_state_dict(torch.load("checkpoint.pth", weights_only=True))
with torch.no_grad():
    xt = torch.rand(4000, 1) * 4 - 2
    mse = F.mse_loss(model(xt), torch.sin(2 * xt)).item()
print(f"METRIC {mse:.4f}")
'''

_BUG = """self.save_checkpoint(val_loss, model, path)"""
_TWIN = """if val_loss < self.val_loss_min:
            self.save_checkpoint(val_loss, model, path)
            self.counter = 0
        else:
            self.counter += 1
            if self.counter >= self.patience:
                self.early_stop = True"""


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CALL__', _BUG if bug else _TWIN)
