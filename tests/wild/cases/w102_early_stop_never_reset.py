"""An early-stopping counter that is never reset when the validation loss improves: it counts every
non-improving epoch since the start, not consecutive ones, so a run that is still improving stops as
soon as it has had ``patience`` noisy epochs in all.

Source: royerlab/cytoself#29 (https://github.com/royerlab/cytoself/issues/29), "Early stopping does not
count consecutive steps on pytorch branch": "The paper says ... training was terminated when the
validation loss did not improve for more than 12 consecutive epochs. ... `if _vloss < best_vloss:
best_vloss = _vloss ... else: count_lr_no_improve += 1; count_early_stop += 1` I believe you need to
add `count_early_stop=0` in the `if` branch to reset the counter"; maintainer: "Yes, you're right and
I have pushed a fix for this issue."  Also modelscope/ms-swift#5326 ("The patience counter ... was not
reset after a new best loss was found, leading to premature termination of training").  Here an MLP
on digits is trained with plain SGD (lr 0.01, a slow but steady run) for up to 40 epochs, judged each
epoch on a batch of 64 drawn from 200 validation digits, stopped after 3 epochs without improvement,
and the best model is restored and tested on the other 197 digits; the twin resets the counter on
improvement.

Metric: test accuracy of the restored best model (plain ``python``, CPU, seed 0): bug 0.5025, twin 0.7766.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N76"
MECHANISM = "early-stopping-counter-not-reset"
SLUGS = ()
METRIC = ("test_accuracy", 0.5025, 0.7766)

_SCRIPT = PRELUDE + FIT + '''
import copy

PATIENCE = 3
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
#@guard
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
best_vloss, best_state, count_early_stop = float("inf"), None, 0
g = torch.Generator().manual_seed(1)
for epoch in range(40):
    fit(model, opt, train_loader, 1)
    model.eval()
    with torch.no_grad():
        sample = 1400 + torch.randperm(200, generator=g)[:64]          # a validation batch per epoch
        vloss = F.cross_entropy(model(X[sample]), Y[sample]).item()
    model.train()
    if vloss < best_vloss:
        best_vloss = vloss
        best_state = copy.deepcopy(model.state_dict())
__RESET__    else:
        count_early_stop += 1
    if count_early_stop >= PATIENCE:
        print(f"early stop at epoch {epoch}")
        break
model.load_state_dict(best_state)
model.eval()
with torch.no_grad():
    acc = (model(X[1600:]).argmax(1) == Y[1600:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESET__", "" if bug else "        count_early_stop = 0\n")
