"""A pairwise reward-model loss without its logarithm: the Bradley-Terry loss is ``-log sigmoid(r_chosen -
r_rejected)``; maximising ``sigmoid(r_chosen - r_rejected)`` itself has the same optimum but a gradient that
vanishes on pairs the model ranks confidently wrong, so those pairs are never corrected -- nothing fails, the loss
falls.

Source: HarderThenHarder/transformers_tasks#15 (https://github.com/HarderThenHarder/transformers_tasks/issues/15),
"Here seems Wrong" on the RLHF reward model's loss; a commenter: "People usually minimize -log p"; maintainer:
"I checked paper and found it uses `-log p` ... **I have fix this problem.** The only thing I did is to switch
sigmoid loss to logsigmoid loss", with a comparative experiment in which the log loss learns faster. Here a reward
model (an MLP giving a digit image one score) is trained on pairs of digits in which the one with the larger label
is preferred; the buggy loss is ``-sigmoid(margin).mean()``, the twin's ``-logsigmoid(margin).mean()``. The
reproduction replaces the repository's ERNIE model and ranked sentences by an MLP on digits.

Metric: pairwise ranking accuracy on held-out pairs (plain ``python``, CPU, seed 0): bug 0.8098, twin 0.8466
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N417"
MECHANISM = "pairwise-reward-loss-without-log"
SLUGS = ()
METRIC = ("test_pair_accuracy", 0.8098, 0.8466)

_SCRIPT = PRELUDE + '''

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
gen = torch.Generator().manual_seed(0)
for step in range(300):
    a = torch.randint(0, 1400, (128,), generator=gen)
    b = torch.randint(0, 1400, (128,), generator=gen)
    keep = Y[a] != Y[b]
    a, b = a[keep], b[keep]
    chosen = torch.where(Y[a] > Y[b], a, b)
    rejected = torch.where(Y[a] > Y[b], b, a)
    margin = model(X[chosen]).squeeze(1) - model(X[rejected]).squeeze(1)
    __LOSS__
    opt.zero_grad()
    loss.backward()
    opt.step()
model.eval()
with torch.no_grad():
    a = torch.randint(1400, len(X), (4000,), generator=gen)
    b = torch.randint(1400, len(X), (4000,), generator=gen)
    keep = Y[a] != Y[b]
    a, b = a[keep], b[keep]
    scores = model(X).squeeze(1)
    acc = ((scores[a] > scores[b]) == (Y[a] > Y[b])).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "loss = -torch.sigmoid(margin).mean()"
_FIX = "loss = -F.logsigmoid(margin).mean()"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOSS__", _BUG if bug else _FIX)
