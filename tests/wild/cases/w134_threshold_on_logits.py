"""Detection decisions taken by thresholding raw logits at 0.5, a threshold meant for
probabilities: every event whose logit lies between 0 and 0.5 (a probability between 0.5 and 0.62)
is counted as absent, and the reported F1 loses much of its recall -- with no error.

Source: dr-costas/dnd-sed#1 (https://github.com/dr-costas/dnd-sed/issues/1), "No sigmoid on
logits?": "It seems like that metric functions are using direct logit values from `Linear` and
calculate positive/negative by thresholding with 0.5, but I cannot find any `sigmoid` or similar
variants that transforms logits into probability estimations"; maintainer: "No, you are absolutely
right, this is a bug."  Here noisy frames (digits with strong noise) carry 6 event labels, each a
set of digits; an MLP is trained with ``BCEWithLogitsLoss`` for a few epochs and evaluated with the
frame-wise macro F1 of sound event detection.  The buggy metric thresholds ``output > 0.5``; the twin
``torch.sigmoid(output) > 0.5``.

Metric: validation macro F1 over the events (plain ``python``, CPU, seed 0): bug 0.3026, twin 0.4288.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N108"
MECHANISM = "threshold-on-logits"
SLUGS = ()
METRIC = ("val_macro_f1", 0.3026, 0.4288)

_SCRIPT = PRELUDE + '''
from sklearn.metrics import f1_score

g = torch.Generator().manual_seed(1)
events_of_digit = (torch.rand(10, 6, generator=g) < 0.3).float()
events = events_of_digit[Y]
frames = X + 0.4 * torch.randn(X.shape, generator=g)

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 6))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
loader = DataLoader(TensorDataset(frames[:1400], events[:1400]), batch_size=64, shuffle=True)
for epoch in range(8):
    model.train()
    for xb, eb in loader:
        opt.zero_grad()
        nn.BCEWithLogitsLoss()(model(xb), eb).backward()
        opt.step()

model.eval()
with torch.no_grad():
    output = model(frames[1400:])
decisions = (__SCORES__ > 0.5).int().numpy()
print(f"METRIC {f1_score(events[1400:].int().numpy(), decisions, average='macro', zero_division=0):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORES__", "output" if bug else "torch.sigmoid(output)")
