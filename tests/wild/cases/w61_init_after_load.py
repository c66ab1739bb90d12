"""Resuming from a checkpoint and then initialising the parameters: the weights just loaded are
overwritten with fresh random ones, and training continues from scratch as if it had resumed.

Source: huggingface/picotron#32 (https://github.com/huggingface/picotron/issues/32): "we call
`init_model_parameters` after `load_state_dict`. It will overwrite weights from checkpoint"; a
second user: "i think this may be a bug for resume traning".  Here a first run trains an MLP on
digits for 4 epochs and saves a checkpoint; the resumed run builds the model, loads the checkpoint,
calls its ``init_model_parameters()`` and trains one more epoch at a lower learning rate; the twin
initialises before loading.

Metric: validation accuracy after the resumed epoch (plain ``python``, CPU, seed 0): bug 0.4207,
twin 0.8892.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N35"
MECHANISM = "init-after-load"
SLUGS = ()
METRIC = ("val_accuracy", 0.4207, 0.8892)

_SCRIPT = PRELUDE + '''
import os
import shutil
import tempfile


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))

    def init_model_parameters(self):
        for layer in (self.fc1, self.fc2):
            nn.init.kaiming_uniform_(layer.weight, nonlinearity="relu")
            nn.init.zeros_(layer.bias)


def train(model, opt, epochs):
    loader = DataLoader(train_ds, batch_size=64, shuffle=True)
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


run_dir = tempfile.mkdtemp()
path = os.path.join(run_dir, "checkpoint.pt")

# the first run: 4 epochs, then a checkpoint
first = Net()
first.init_model_parameters()
opt = torch.optim.Adam(first.parameters(), lr=1e-2)
train(first, opt, 4)
torch.save({"model": first.state_dict(), "optimizer": opt.state_dict()}, path)

# the resumed run
model = Net()
checkpoint = torch.load(path, weights_only=True)
shutil.rmtree(run_dir)
__RESTORE__
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
train(model, opt, 1)
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    if bug:
        restore = 'model.load_state_dict(checkpoint["model"])\nmodel.init_model_parameters()'
    else:
        restore = 'model.init_model_parameters()\nmodel.load_state_dict(checkpoint["model"])'
    return _SCRIPT.replace("__RESTORE__", restore)
