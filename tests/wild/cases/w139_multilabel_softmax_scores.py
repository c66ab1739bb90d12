"""A multi-label tagger trained with independent sigmoids (``BCEWithLogitsLoss``) but scored
through a softmax over the tags: the scores of a sample's tags now compete and sum to one, so a
sample with three true tags gets at most a third on each and the thresholded predictions lose
most of their positives -- with no error.

Source: Spijkervet/CLMR#3 (https://github.com/Spijkervet/CLMR/issues/3), "Possible major bug in
evaluation": "in the evaluation.py in line 29 there is `output = torch.nn.functional.softmax(output,
dim=1)`. But, as far as I understand, the Magnatagatune (and the MSD dataset) are multi-label tasks
- their loss functions are also the binary cross entropy in code. Hence, I suppose that instead of
the softmax there should be a `torch.sigmoid` being used there"; maintainer: "I changed the BCELoss
to BCEWithLogitsLoss (removing an nn.Sigmoid() call) for the training scheme, but missed adding a
sigmoid operation during evaluation."  Here digits carry 8 tags (each tag is a set of digits, so a
digit has one to five tags); an MLP is trained with ``BCEWithLogitsLoss`` and evaluated by macro F1
at the usual 0.5 threshold.  The buggy evaluation scores with ``F.softmax(output, dim=1)``, the
twin with ``torch.sigmoid(output)``.  (The report's own metric, ROC-AUC per tag, moved by 0.2
points there; a thresholded metric shows the same cause plainly.)

Metric: validation macro F1 over the tags (plain ``python``, CPU, seed 0): bug 0.3985, twin 0.8909.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N113"
MECHANISM = "multilabel-scores-softmaxed"
SLUGS = ()
METRIC = ("val_macro_f1", 0.3985, 0.8909)

_SCRIPT = PRELUDE + '''
from sklearn.metrics import f1_score

g = torch.Generator().manual_seed(1)
tag_of_digit = (torch.rand(10, 8, generator=g) < 0.35).float()
tag_of_digit[tag_of_digit.sum(1) == 0, 0] = 1.0  # every digit has at least one tag
tags = tag_of_digit[Y]

model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 8))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
loader = DataLoader(TensorDataset(X[:1400], tags[:1400]), batch_size=64, shuffle=True)
for epoch in range(15):
    model.train()
    for xb, tb in loader:
        opt.zero_grad()
        nn.BCEWithLogitsLoss()(model(xb), tb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    output = model(X[1400:])
    scores = __SCORES__
predicted = (scores > 0.5).int().numpy()
print(f"METRIC {f1_score(tags[1400:].int().numpy(), predicted, average='macro', zero_division=0):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORES__", "F.softmax(output, dim=1)" if bug else "torch.sigmoid(output)")
