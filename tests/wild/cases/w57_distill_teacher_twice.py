"""A distillation loss that compares the teacher with itself: the student's logits are computed,
then the soft loss is taken between the teacher's log-probabilities and the teacher's
probabilities, a constant that gives the student no gradient, so nothing is distilled.

Source: labmlai/annotated_deep_learning_paper_implementations#66
(https://github.com/labmlai/annotated_deep_learning_paper_implementations/issues/66): "I think you
mean to use `output` rather than using `large_logits` again here"; the maintainer: "It's not a
small bug, it just completely stops doing the distillation."  Here a small student sees 60 labelled
digits (cross-entropy) and 1400 digits through a trained teacher (soft loss, temperature 4); the
twin takes the soft loss on the student's logits.

Metric: the student's validation accuracy (plain ``python``, CPU, seed 0): bug 0.7204, twin 0.8766.
"""

from tests.wild.cases.common import FIT, PRELUDE, TEACHER, VAL_ACCURACY

REPORT = "N31"
MECHANISM = "distillation-target-from-teacher"
SLUGS = ()
METRIC = ("val_accuracy", 0.7204, 0.8766)

_SCRIPT = PRELUDE + FIT + TEACHER + '''
T = 4.0
labelled_x, labelled_y = X[:60], Y[:60]
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(TensorDataset(X[:1400]), batch_size=64, shuffle=True)
for epoch in range(4):
    for (xb,) in loader:
        with torch.no_grad():
            large_logits = teacher(xb)
        output = model(xb)
        soft_targets = F.softmax(large_logits / T, dim=1)
        soft_loss = F.kl_div(F.log_softmax(__LOGITS__ / T, dim=1), soft_targets, reduction="batchmean") * T * T
        hard_loss = F.cross_entropy(model(labelled_x), labelled_y)
        loss = 0.5 * soft_loss + 0.5 * hard_loss
        opt.zero_grad()
        loss.backward()
        opt.step()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOGITS__", "large_logits" if bug else "output")
