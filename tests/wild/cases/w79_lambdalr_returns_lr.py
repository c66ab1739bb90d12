"""``LambdaLR`` given a lambda that returns the learning rate itself instead of a multiplicative
factor: ``LambdaLR`` multiplies the optimizer's base rate by the lambda's value, so the base rate is
applied twice and training runs at lr squared.

Source: lhoyer/MIC#60 (https://github.com/lhoyer/MIC/issues/60), "Lambda learning rate
scheduler": ``LambdaLR(optimizer, lambda x: args.lr * (1. + args.lr_gamma * float(x)) **
(-args.lr_decay))`` -- "The lambda in LambdaLR is supposed to return the factor to multiply with the
base learning rate, so it should not include a multiplication by `args.lr`. This causes the base lr
to be multiplied twice (for example, it produces 0.0001 instead of 0.01"; maintainer: "Yes, you are
right about this" (kept for comparability with SDAT, which has the same bug).  Here an MLP on digits
is trained with SGD (lr 0.01, momentum 0.9) and the same inverse-decay schedule, stepped per batch;
the twin's lambda returns the factor alone.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.1134, twin 0.8463.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N53"
MECHANISM = "lr-lambda-returns-rate"
SLUGS = ()
METRIC = ("val_accuracy", 0.1134, 0.8463)

_SCRIPT = PRELUDE + '''
LR, LR_GAMMA, LR_DECAY = 0.01, 0.001, 0.75
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=LR, momentum=0.9)
#@guard
scheduler = torch.optim.lr_scheduler.LambdaLR(opt, lambda x: __FACTOR__ * (1. + LR_GAMMA * float(x)) ** (-LR_DECAY))
loader = DataLoader(train_ds, batch_size=32, shuffle=True)
for epoch in range(4):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
        scheduler.step()
    print(f"epoch {epoch}: lr {scheduler.get_last_lr()[0]:.2e}")
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FACTOR__", "LR" if bug else "1.")
