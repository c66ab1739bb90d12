"""Patience that stops when the latest validation loss is worse than the *worst* of the previous ``patience``
epochs: one noisy epoch above its neighbours ends a run that is still improving, where patience means stopping
only when the last ``patience`` epochs hold no new best -- nothing fails.

Source: allenai/allennlp#426 (https://github.com/allenai/allennlp/pull/426), "Fix patience": "This fixes
early-stopping / patience in the trainer. Patience should be defined as \\"Stop if you haven't improved the metric
in N epochs\\", but the previous definition was \\"Stop if the current score is worse than the worse in N
epochs\\". This lead to cases where training would stop even if the metric had increased recently" (merged, with a
test the maintainer asked for). Here an MLP on the digits is trained with plain SGD (lr 0.01, slow but steady) for
up to 40 epochs, judged each epoch on a batch of 24 drawn from 200 validation digits, and the best weights (by that
loss) are tested on the other 197 digits; the bug's ``should_stop_early`` compares the latest loss with the maximum
of the previous three, the twin asks whether the best of the last three is worse than the best so far, as the fix
does. The reproduction replaces AllenNLP's trainer and models by a loop and an MLP.

Metric: test accuracy of the best weights (plain ``python``, CPU, seed 0): bug 0.7766, twin 0.8173
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N401"
MECHANISM = "patience-compares-with-window-worst"
SLUGS = ()
METRIC = ("test_accuracy", 0.7766, 0.8173)

_SCRIPT = PRELUDE + FIT + '''
import copy

PATIENCE = 3
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
#@guard
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)


def should_stop_early(metric_history):
__STOP__


history, best_state = [], None
g = torch.Generator().manual_seed(1)
for epoch in range(40):
    fit(model, opt, train_loader, 1)
    model.eval()
    with torch.no_grad():
        sample = 1400 + torch.randperm(200, generator=g)[:24]          # a validation batch per epoch
        vloss = F.cross_entropy(model(X[sample]), Y[sample]).item()
    model.train()
    if not history or vloss < min(history):
        best_state = copy.deepcopy(model.state_dict())
    history.append(vloss)
    if should_stop_early(history):
        print(f"early stop at epoch {epoch}")
        break
model.load_state_dict(best_state)
model.eval()
with torch.no_grad():
    acc = (model(X[1600:]).argmax(1) == Y[1600:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = '''    if len(metric_history) > PATIENCE:
        return metric_history[-1] > max(metric_history[-PATIENCE - 1:-1])
    return False'''
_FIX = '''    if len(metric_history) > PATIENCE:
        return min(metric_history[-PATIENCE:]) > min(metric_history)
    return False'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__STOP__", _BUG if bug else _FIX)
