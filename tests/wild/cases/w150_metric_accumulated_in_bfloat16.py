"""An evaluation loop that accumulates its counts in bfloat16 (the dtype of everything under a
bfloat16 setting): past 256 a bfloat16 sum can no longer grow by one, so the numerator of the
accuracy stops counting while the denominator, a Python int, keeps growing, and the reported
accuracy falls far below the real one -- with no error.

Source: pytorch/xla#2425 (https://github.com/pytorch/xla/pull/2425), "Add warning on loss values when
using XLA_USE_BF16": "The problem w/ loss + bf16 arises when user accumulates tensors, the numerator
stops growing due to lack of precision but denom. keeps growing. so if one looks at the raw loss
tensors at a given step, in bf16, that is definitely a meaningful value. but if one looks at the
**average** loss over 100 steps, computed as `sum(losses) / 100`, than that's not meaningful"; the
documentation it adds: "`torch.tensor(4096, dtype=torch.bfloat16) + torch.tensor(1,
dtype=torch.bfloat16)` ... `tensor(4096., dtype=torch.bfloat16)`".  Here an MLP trained on digits
is evaluated on 1397 digits (the first 400 training digits and the 997 held out) one example at a
time, as a per-example evaluation does, and the running count of correct predictions is a tensor;
the buggy loop keeps it in bfloat16 (as ``XLA_USE_BF16=1`` or a model cast to bfloat16 makes it),
the twin in float32.

Metric: reported accuracy (plain ``python``, CPU, seed 0): bug 0.1832, twin 0.9026 (the twin is the
real accuracy).
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N124"
MECHANISM = "metric-accumulated-in-low-precision"
SLUGS = ()
METRIC = ("reported_accuracy", 0.1832, 0.9026)

_SCRIPT = PRELUDE + '''
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(10):
    for xb, yb in DataLoader(TensorDataset(X[:800], Y[:800]), batch_size=32, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

model.eval()
eval_x, eval_y = torch.cat([X[:400], X[800:]]), torch.cat([Y[:400], Y[800:]])
correct = torch.zeros((), dtype=__DTYPE__)
seen = 0
with torch.no_grad():
    for xb, yb in DataLoader(TensorDataset(eval_x, eval_y), batch_size=1):  # one example at a time
        correct += (model(xb).argmax(1) == yb).sum().to(correct.dtype)
        seen += len(yb)
print(f"METRIC {correct.item() / seen:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DTYPE__", "torch.bfloat16" if bug else "torch.float32")
