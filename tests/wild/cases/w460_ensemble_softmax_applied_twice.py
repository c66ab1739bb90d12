"""A member model whose ``predict(x, return_logits=True)`` ignores the flag and returns probabilities, averaged by
an ensemble that applies its own softmax: the ensemble's probabilities are a softmax of probabilities, squeezed
towards uniform, so its log-loss and calibration are ruined while its argmax (and accuracy) is unchanged -- nothing
fails.

Source: layer6ai-labs/TabDPT-inference#46 (https://github.com/layer6ai-labs/TabDPT-inference/pull/46), "Fix bug where
softmax is applied twice": "return_logits is ignored in one branch, sometimes causing miscalibrated outputs when
ensemble_predict_proba is used" (merged). Here three MLP members are trained on the digits through their own
``predict(x, return_logits=True)`` and ``ensemble_predict_proba`` averages ``predict(x,
return_logits=True).softmax(-1)``; the bug's member returns ``logits.softmax(-1)`` whatever the flag, the twin's
returns the logits when asked. The reproduction departs from the report in the model (an ensemble of MLPs instead of
the TabDPT transformer's ensembled context passes), the data (digits instead of tabular benchmarks) and in that the
bug's members are also trained through the ignored flag (a cross-entropy of probabilities), where the report's flag
is ignored in one inference branch only.

Metric: test negative log-likelihood of the ensemble's probabilities (lower is better; plain ``python``, CPU,
seed 0): bug 1.6327, twin 0.4034
"""

REPORT = "N434"
MECHANISM = "softmax-applied-to-probabilities"
SLUGS = ()
METRIC = ("test_nll", 1.6327, 0.4034)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)


class Member(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))

    def predict(self, x, return_logits=False):
        logits = self.net(x)
        __RETURN__


members = [Member() for _ in range(3)]
model = nn.ModuleList(members)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(20):
    perm = torch.randperm(1400)
    for k in range(0, 1400, 64):
        idx = perm[k:k + 64]
        loss = sum(F.cross_entropy(m.predict(X[idx], return_logits=True), Y[idx]) for m in members)
        opt.zero_grad()
        loss.backward()
        opt.step()


def ensemble_predict_proba(x):
    return torch.stack([m.predict(x, return_logits=True).softmax(dim=-1) for m in members]).mean(0)


model.eval()
with torch.no_grad():
    proba = ensemble_predict_proba(X[1400:])
    nll = F.nll_loss(proba.log(), Y[1400:]).item()
print(f"METRIC {nll:.4f}")
'''

_BUG = "return logits.softmax(dim=-1)"
_FIX = "return logits if return_logits else logits.softmax(dim=-1)"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RETURN__", _BUG if bug else _FIX)
