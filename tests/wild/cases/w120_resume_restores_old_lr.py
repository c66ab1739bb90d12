"""Fine-tuning resumed from a checkpoint at a new, lower learning rate: ``optimizer.load_state_dict``
restores the parameter groups saved in the checkpoint, their ``lr`` included, so the run continues at
the old rate and the new one given on the command line is silently ignored.

Source: pytorch/examples#816 (https://github.com/pytorch/examples/issues/816), "Resume will override
learning rate on command line": "If you resume from a checkpoint and want to run with a new learning
rate, the saved learning rate will overwrite what you specify on the command line. The fix is
simple."; maintainer: "Would you like to make the fix?"  Here a first stage trains an MLP on digits
with SGD at lr 0.8 and saves model and optimizer; a second stage resumes with ``--lr 0.02`` to settle
the weights; the twin sets every group's ``lr`` to the requested rate after loading the state.

Metric: validation loss after the second stage (plain ``python``, CPU, seed 0; lower is better):
bug 0.6624, twin 0.51.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N94"
MECHANISM = "resume-restores-old-lr"
SLUGS = ()
METRIC = ("val_loss", 0.6624, 0.51)

_SCRIPT = PRELUDE + FIT + '''
import io

stage1 = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt1 = torch.optim.SGD(stage1.parameters(), lr=0.8, momentum=0.9)
fit(stage1, opt1, DataLoader(train_ds, batch_size=64, shuffle=True), 3)
buffer = io.BytesIO()
torch.save({"model": stage1.state_dict(), "optimizer": opt1.state_dict()}, buffer)

ARGS_LR = 0.02                                                 # the resumed run's --lr
buffer.seek(0)
checkpoint = torch.load(buffer, weights_only=True)
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
model.load_state_dict(checkpoint["model"])
opt = torch.optim.SGD(model.parameters(), lr=ARGS_LR, momentum=0.9)
opt.load_state_dict(checkpoint["optimizer"])
__RESET__
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 3)

model.eval()
with torch.no_grad():
    loss = F.cross_entropy(model(X[1400:]), Y[1400:]).item()
print(f"METRIC {loss:.4f}")
'''


def script(bug: bool) -> str:
    reset = "# the checkpoint's lr stays in force" if bug else \
        "for group in opt.param_groups:\n    group[\"lr\"] = ARGS_LR                          # the requested rate"
    return _SCRIPT.replace("__RESET__", reset)
