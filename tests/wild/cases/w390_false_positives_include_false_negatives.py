"""A sequence-labelling evaluation whose false-positive count takes every token where the prediction differs from the
label, so the tokens of an entity predicted as ``O`` (false negatives) are counted as false positives too: the counts
sum to more than the number of tokens and the reported precision is lower than the tagger's -- nothing fails.

Source: chakki-works/seqeval#20 (https://github.com/chakki-works/seqeval/pull/20), "Fix wrong FP calculation": "In
test example: `FP` should have been 2 but because of the wrong operator condition - it was including FN also. Total
instances should sum up to `10` and previously it was wrong - `11`. Fixed to consider only `B`,`I` tags and excluding
`O` tags for FP calculation." (merged; completed by #40, "I faced to the same problem"). Here an MLP tags 4000
synthetic tokens (``O`` and the ``B``/``I`` tags of two entity types, each tag a noisy prototype) and is scored on
3000 new tokens by a ``performance_measure`` written like seqeval's; the bug counts ``FP`` as ``y_true != y_pred``,
the twin as ``(y_true != y_pred) & (y_pred != O)``. The reproduction replaces sentences and a CRF tagger by
independent tokens and an MLP, and reports token-level precision ``TP / (TP + FP)``.

Metric: token-level precision of the entity tags on 3000 test tokens (plain ``python``, CPU, seed 0; the bug's number
is the reported one, the twin's the tagger's): bug 0.5740, twin 0.6577
"""

REPORT = "N364"
MECHANISM = "false-positives-counted-over-all-mismatches"
SLUGS = ()
METRIC = ('test_token_precision', 0.574, 0.6577)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
TAGS = ['O', 'B-PER', 'I-PER', 'B-LOC', 'I-LOC']
probs = torch.tensor([0.6, 0.1, 0.1, 0.1, 0.1])
proto = torch.randn(5, 20)


def tokens(n):
    t = torch.multinomial(probs, n, replacement=True)
    return proto[t] + 2.4 * torch.randn(n, 20), t


Xtr, ytr = tokens(4000)
Xte, yte = tokens(3000)
model = nn.Sequential(nn.Linear(20, 64), nn.ReLU(), nn.Linear(64, 5))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(600):
    i = torch.randint(0, 4000, (64,))
    loss = F.cross_entropy(model(Xtr[i]), ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()


def performance_measure(y_true, y_pred):
    o = TAGS.index('O')
    tp = ((y_true == y_pred) & (y_true != o)).sum().item()
__FP__    fn = ((y_true != y_pred) & (y_pred == o)).sum().item()
    tn = ((y_true == y_pred) & (y_true == o)).sum().item()
    return {'TP': tp, 'FP': fp, 'FN': fn, 'TN': tn}


with torch.no_grad():
    pred = model(Xte).argmax(1)
m = performance_measure(yte, pred)
print(f"METRIC {m['TP'] / (m['TP'] + m['FP']):.4f}")
'''


def script(bug: bool) -> str:
    fp = ('    fp = (y_true != y_pred).sum().item()\n' if bug
          else '    fp = ((y_true != y_pred) & (y_pred != o)).sum().item()\n')
    return _SCRIPT.replace('__FP__', fp)
