"""Early stopping that watches the training loss instead of the validation loss: the training loss
keeps falling while the model memorises its noisy labels, so the stop never comes and the model
delivered is the over-fitted one of the last epoch.

Source: citoverse/cito#38 (https://github.com/citoverse/cito/issues/38), "early stopping":
"Funktioniert die richtig?" (does it work correctly?); reply: "fehler liegt in training.R zeile 108:
model$losses$train_l[epoch] -> model$losses$valid_l[epoch]" (the error is in training.R line 108: the
training loss where the validation loss belongs).  Here a wide MLP is trained full-batch on 1000
digits, 40% of them relabelled at random, with early stopping (patience 10) that keeps the weights of the
best epoch; the buggy stopper reads the training loss, the twin the loss on a validation split with
the same label noise.

Metric: accuracy of the delivered model on clean test digits (plain ``python``, CPU, seed 0): bug
0.5793, twin 0.8741.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N99"
MECHANISM = "early-stopping-watches-train-loss"
SLUGS = ()
METRIC = ("test_accuracy", 0.5793, 0.8741)

_SCRIPT = PRELUDE + '''
import copy

g = torch.Generator().manual_seed(1)
noisy = torch.where(torch.rand(1400, generator=g) < 0.4, torch.randint(10, (1400,), generator=g), Y[:1400])
xt, yt, xv, yv = X[:1000], noisy[:1000], X[1000:1400], noisy[1000:1400]

model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
best, best_state, wait, PATIENCE = float("inf"), None, 0, 10
for epoch in range(300):
    model.train()
    opt.zero_grad()
    train_loss = F.cross_entropy(model(xt), yt)
    train_loss.backward()
    opt.step()
    model.eval()
    with torch.no_grad():
        valid_loss = F.cross_entropy(model(xv), yv)
    monitored = __MONITOR__.item()
    if monitored < best:
        best, best_state, wait = monitored, copy.deepcopy(model.state_dict()), 0
    else:
        wait += 1
        if wait >= PATIENCE:
            break
model.load_state_dict(best_state)
print(f"stopped after epoch {epoch}")

model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MONITOR__", "train_loss" if bug else "valid_loss")
