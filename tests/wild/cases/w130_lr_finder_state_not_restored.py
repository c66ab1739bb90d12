"""A learning-rate range test run on the model that is then trained: the test drives the rate up
until the loss diverges and leaves the weights (and the optimizer's moments) where the divergence
put them, so the real training starts from a wrecked model instead of the initial one -- with no
error.

Source: davidtvs/pytorch-lr-finder#11 (https://github.com/davidtvs/pytorch-lr-finder/issues/11), "LR
Finder doesn't restore original model weights?": "Using LRFinder on a model, and then training with
it afterwards appears to hurt the models learning ... Using LRFinder on a model, and _manually_
restoring the weights, appears to train the model optimally."  Here the README's recipe is followed
on digits with SGD (momentum 0.9): a range test from 1e-5 to 100 over 100 batches that stops when
the smoothed loss (the finder's smoothing, 0.05) exceeds five times its best, the rate at the lowest
smoothed loss divided by ten is chosen, and the model is trained for 3 epochs at that rate.  The
buggy script trains the model as the range test left it; the twin first restores the model's and
the optimizer's state saved before the test (what ``LRFinder.reset()`` does).

Metric: validation accuracy after training (plain ``python``, CPU, seed 0): bug 0.199, twin 0.8539.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N104"
MECHANISM = "range-test-state-not-restored"
SLUGS = ()
METRIC = ("val_accuracy", 0.199, 0.8539)

_SCRIPT = PRELUDE + '''
import copy

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=1e-5, momentum=0.9)
#@guard
loader = DataLoader(train_ds, batch_size=32, shuffle=True)

# the learning-rate range test
saved = copy.deepcopy(model.state_dict()), copy.deepcopy(opt.state_dict())
start, end, iters = 1e-5, 100.0, 100
lrs, losses, best = [], [], float("inf")
batches = iter(loader)
for i in range(iters):
    try:
        xb, yb = next(batches)
    except StopIteration:
        batches = iter(loader)
        xb, yb = next(batches)
    lr = start * (end / start) ** (i / (iters - 1))
    for group in opt.param_groups:
        group["lr"] = lr
    opt.zero_grad()
    loss = F.cross_entropy(model(xb), yb)
    loss.backward()
    opt.step()
    smoothed = loss.item() if not losses else 0.05 * loss.item() + 0.95 * losses[-1]  # the finder's smoothing
    lrs.append(lr)
    losses.append(smoothed)
    best = min(best, smoothed)
    if smoothed > 5 * best:
        break
chosen = lrs[losses.index(min(losses))] / 10
__RESET__

for group in opt.param_groups:
    group["lr"] = chosen
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"chosen lr {chosen:.2e}")
print(f"METRIC {acc:.4f}")
'''

_RESET = "model.load_state_dict(saved[0])\nopt.load_state_dict(saved[1])  # LRFinder.reset()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESET__", "" if bug else _RESET)
