"""Layers replaced after the optimizer was built (pruning "speed-up"): the optimizer keeps
stepping the old, detached parameters and fine-tuning leaves the pruned model unchanged.

Source: microsoft/nni#4521 (https://github.com/microsoft/nni/issues/4521): after
``speedup_model()`` replaced layers with smaller ones, "the parameters registered in the optimizer
are outdated ... an easy way is reinitializing a new optimizer".  Here a trained model's hidden
layer is pruned from 64 to 6 units by copying the strongest units into new, smaller layers, then
fine-tuned; the twin builds the optimizer after the surgery.

Metric: validation accuracy after fine-tuning the pruned model (plain ``python``, CPU, seed 0):
bug 0.3249, twin 0.806.
"""

from tests.wild.cases.common import ACCURACY, PRELUDE

REPORT = "N20"
MECHANISM = "optimizer-stale-params"
SLUGS = ("params-not-optimized",)
METRIC = ("val_accuracy", 0.3249, 0.806)

_SCRIPT = PRELUDE + ACCURACY + '''
class MLP(nn.Module):
    def __init__(self, hidden=64):
        super().__init__()
        self.fc1 = nn.Linear(64, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def train(model, opt, epochs):
    for epoch in range(epochs):
        for xb, yb in train_loader:
            opt.zero_grad()
            F.cross_entropy(model(xb), yb).backward()
            opt.step()


train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
model = MLP()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
train(model, opt, 3)
print("before pruning", accuracy(model, val_loader))

keep = model.fc1.weight.norm(dim=1).argsort(descending=True)[:6]   # prune to 6 hidden units
fc1, fc2 = nn.Linear(64, 6), nn.Linear(6, 10)
with torch.no_grad():
    fc1.weight.copy_(model.fc1.weight[keep]); fc1.bias.copy_(model.fc1.bias[keep])
    fc2.weight.copy_(model.fc2.weight[:, keep]); fc2.bias.copy_(model.fc2.bias)
model.fc1, model.fc2 = fc1, fc2
print("after pruning", accuracy(model, val_loader))
{rebuild}train(model, opt, 3)                                               # fine-tune
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    rebuild = "" if bug else "opt = torch.optim.Adam(model.parameters(), lr=1e-2)\n"
    return _SCRIPT.format(rebuild=rebuild)
