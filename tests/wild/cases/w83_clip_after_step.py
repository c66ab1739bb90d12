"""``clip_grad_norm_`` called after ``optimizer.step()``: the step has already applied the unclipped
gradients, the clipping then rescales gradients that the next ``zero_grad()`` throws away, and
``--max-grad-norm`` silently does nothing.

Source: awslabs/graphstorm#1366 (https://github.com/awslabs/graphstorm/issues/1366), "possible
max_grad_norm implementation error": "Clipping is currently applied after the optimizer step. The
gradient clipping code controlled by the `max-grad-norm` cli param should be implemented between the
backward and step calls"; the fix, awslabs/graphstorm#1382: "every trainer calls
`th.nn.utils.clip_grad_norm_` **after** `optimizer.step()` ... The result is that `--max-grad-norm`
silently does nothing."  Also VGraphRNN/VGRNN#4 and jongwook/onsets-and-frames#24.  Here a
regression MLP on digits (target: the digit's value, with 2% of the training targets corrupted to
+-200, the kind of outliers clipping is there for) is trained with SGD and ``max_norm=1``; the twin
clips between ``backward()`` and ``step()``.

Metric: validation mean absolute error (plain ``python``, CPU, seed 0; lower is better): bug 2.7105, twin 1.5443.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N57"
MECHANISM = "clip-after-step"
SLUGS = ()
METRIC = ("val_mae", 2.7105, 1.5443)

_SCRIPT = PRELUDE + '''
target = Y.float()
g = torch.Generator().manual_seed(1)
noisy = target.clone()
corrupt = torch.rand(1400, generator=g) < 0.02
noisy[:1400][corrupt] = 200.0 * torch.sign(torch.randn(int(corrupt.sum()), generator=g))
loader = DataLoader(TensorDataset(X[:1400], noisy[:1400]), batch_size=32, shuffle=True)
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
#@guard
for epoch in range(10):
    for xb, yb in loader:
        opt.zero_grad()
        F.mse_loss(model(xb).squeeze(1), yb).backward()
__CLIP_AND_STEP__
model.eval()
with torch.no_grad():
    mae = (model(X[1400:]).squeeze(1) - target[1400:]).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''

_BUG = '''        opt.step()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
'''
_TWIN = '''        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        opt.step()
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CLIP_AND_STEP__\n", _BUG if bug else _TWIN)
