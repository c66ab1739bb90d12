"""A checkpoint reloaded with ``load_state_dict(..., strict=False)`` whose keys carry a prefix:
nothing is loaded and the freshly initialised model is what gets evaluated.

Source: pytorch/examples#1029 (https://github.com/pytorch/examples/issues/1029): a Lightning
module kept the network under ``.model``, so the checkpoint's keys began with ``model.``;
``strict=False`` made the mismatch silent and "the model output was nonsense".  Here a wrapper
module holds the network as ``self.model``; its state dict is saved, then loaded into a bare
``Net`` for evaluation.  The twin strips the prefix and loads strictly.

Metric: validation accuracy of the reloaded model (plain ``python``, CPU, seed 0):
bug 0.0932, twin 0.8589.
"""

from tests.wild.cases.common import ACCURACY, FIT, NET, PRELUDE

REPORT = "N02"
MECHANISM = "load-state-dict-no-effect"
SLUGS = ()
METRIC = ("val_accuracy", 0.0932, 0.8589)

_SCRIPT = PRELUDE + NET + ACCURACY + FIT + '''
import io


class Wrapper(nn.Module):
    def __init__(self):
        super().__init__()
        self.model = Net()

    def forward(self, x):
        return self.model(x)


module = Wrapper()
opt = torch.optim.Adam(module.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
fit(module, opt, train_loader, 3, loss_fn)
buf = io.BytesIO()
torch.save(module.state_dict(), buf)
buf.seek(0)
state = torch.load(buf, weights_only=True)

model = Net()
{load}
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    load = ("model.load_state_dict(state, strict=False)" if bug else
            "model.load_state_dict({k.removeprefix('model.'): v for k, v in state.items()})")
    return _SCRIPT.format(load=load)
