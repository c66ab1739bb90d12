"""Training with the model's weights cast to bfloat16 and no float32 master copy: bfloat16 keeps 8
significant bits, so an update smaller than half the spacing between representable weights rounds
away and most weights never move at a small learning rate.

Source: tianweiy/CausVid#19 (https://github.com/tianweiy/CausVid/issues/19): "I manually loaded all
the model with self.model = self.model.to(dtype=torch.bfloat16), and after training for the same
number of steps, the generator is unable to converge"; the maintainer: "those parameter update /
etc.. will suffer if we cast it to bfloat16".  Here an MLP on digits trains with Adam at lr 1e-4
with its parameters in bfloat16; the twin keeps float32 parameters and runs the forward pass under
``torch.autocast(..., dtype=torch.bfloat16)`` (mixed precision: bfloat16 compute, float32 weights).

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.2997, twin 0.6751.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N34"
MECHANISM = "low-precision-master-weights"
SLUGS = ()
METRIC = ("val_accuracy", 0.2997, 0.6751)

_SCRIPT = PRELUDE + '''
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
__CAST__
opt = torch.optim.Adam(model.parameters(), lr=1e-4)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(10):
    for xb, yb in loader:
        with torch.autocast("cpu", dtype=torch.bfloat16):
            logits = model(xb.to(__INPUT_DTYPE__))
        loss = F.cross_entropy(logits.float(), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    acc = (model(X[1400:].to(__INPUT_DTYPE__)).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        cast, dtype = "model = model.to(torch.bfloat16)          # pure bf16: no fp32 master weights", "torch.bfloat16"
    else:
        cast, dtype = "# float32 weights; bfloat16 compute under autocast", "torch.float32"
    return _SCRIPT.replace("__CAST__", cast).replace("__INPUT_DTYPE__", dtype)
