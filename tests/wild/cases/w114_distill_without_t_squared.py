"""Knowledge distillation at temperature T whose soft loss is not multiplied by T²: the soft
targets' gradients shrink as 1/T², so at T = 8 the teacher's signal is 64 times weaker than intended
and the hard-label term, with its noisy labels, drives the student.

Source: IntelLabs/distiller#122 (https://github.com/IntelLabs/distiller/issues/122), "no T*T in
distillation loss": "Why there was no T*T posed on the soft loss in the final distillation loss ?
Actually, in [Hinton, 2015], it is important to utilize T**2 to balance the tradeoff"; maintainer:
"@kuanzi you're correct. Not sure how I neglected it during the implementation. Will fix."  Here a
teacher trained on clean digits distils into a student whose hard labels come from a cheap
labeller that confuses digit d with d + 5 (mod 10) 60% of the time, loss ``0.7 * soft + 0.3 *
hard`` at T = 8; the buggy soft term has no T², the twin multiplies it by T².

Metric: student validation accuracy (plain ``python``, CPU, seed 0): bug 0.3526, twin 0.8866.
"""

from tests.wild.cases.common import FIT, PRELUDE, TEACHER

REPORT = "N88"
MECHANISM = "distillation-loss-unscaled"
SLUGS = ()
METRIC = ("student_val_accuracy", 0.3526, 0.8866)

_SCRIPT = PRELUDE + FIT + TEACHER + '''
T, ALPHA = 8.0, 0.7
g = torch.Generator().manual_seed(1)
noisy = torch.where(torch.rand(1400, generator=g) < 0.6, (Y[:1400] + 5) % 10, Y[:1400])   # a confused labeller
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))          # the student
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
loader = DataLoader(TensorDataset(X[:1400], noisy), batch_size=64, shuffle=True)
for epoch in range(15):
    for xb, yb in loader:
        logits = model(xb)
        with torch.no_grad():
            soft_targets = F.softmax(teacher(xb) / T, dim=1)
        soft = F.kl_div(F.log_softmax(logits / T, dim=1), soft_targets, reduction="batchmean")
        loss = ALPHA * soft__SCALE__ + (1 - ALPHA) * F.cross_entropy(logits, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()

''' + '''
model.eval()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCALE__", "" if bug else " * T * T")
