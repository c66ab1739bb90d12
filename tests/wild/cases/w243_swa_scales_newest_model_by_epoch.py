"""A stochastic-weight-averaging update that weights the incoming model by the epoch count and the running
average by one: ``(new * epoch + average) / (epoch + 1)`` instead of ``(average * epoch + new) / (epoch + 1)``,
so the last snapshot dominates and the "averaged" model is nearly the final noisy iterate -- with no error.

Source: pbaylies/stylegan-encoder#13 (https://github.com/pbaylies/stylegan-encoder/issues/13), "Stochastic
Weight Averaging bug": "the scaling appears incorrect because the new model weights are scaled up by the
epoch: `(src_net.vars[name] * epoch + self.vars[name])/(epoch + 1)` ... The result is that, regardless of what
models swa.py reads in, the last pkl it reads will be scaled so much it overwrites pretty much all of weights
in the current model" (fixed by #14, merged).  Here an MLP is trained on scikit-learn's digits with plain SGD
at a large constant learning rate and small batches (a noisy iterate, the regime SWA is for), and from epoch
10 on the weights of each epoch are folded into an averaged copy by an ``apply_swa(src, epoch)`` written like
the report's.  The buggy update is ``(src * epoch + avg) / (epoch + 1)``, the twin ``(src + avg * epoch) /
(epoch + 1)``.

Metric: validation cross-entropy of the averaged model (plain ``python``, CPU, seed 0): bug 0.2819, twin 0.2618
(lower is better)
"""

REPORT = "N217"
MECHANISM = "weight-average-scales-newest-by-count"
SLUGS = ()
METRIC = ("swa_val_loss", 0.2819, 0.2618)

_SCRIPT = '''
import copy
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xva, Yva = X[:1200], Y[:1200], X[1200:], Y[1200:]
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5)
swa = None


def apply_swa(avg, src, epoch):
    with torch.no_grad():
        for a, s in zip(avg.parameters(), src.parameters()):
            a.copy_(__UPDATE__)


#@guard
for epoch in range(40):
    perm = torch.randperm(len(Xtr))
    for s in range(0, len(Xtr), 8):
        b = perm[s:s + 8]
        loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
    if epoch == 10:
        swa, n_avg = copy.deepcopy(model), 1
    elif epoch > 10:
        apply_swa(swa, model, n_avg)
        n_avg += 1

with torch.no_grad():
    val_loss = F.cross_entropy(swa(Xva), Yva)
print(f"METRIC {val_loss.item():.4f}")
'''


def script(bug: bool) -> str:
    update = "(s * epoch + a) / (epoch + 1)" if bug else "(s + a * epoch) / (epoch + 1)"
    return _SCRIPT.replace("__UPDATE__", update)
