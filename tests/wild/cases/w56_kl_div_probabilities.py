"""Knowledge distillation with ``F.kl_div(student, teacher)`` where the student is given as
probabilities: ``kl_div`` expects log-probabilities for its input, so the loss is no longer a
divergence and its minimum is not the teacher's distribution.

Source: microsoft/ProDA#20 (https://github.com/microsoft/ProDA/issues/20): "Usually people use
loss_kd = F.kl_div(student.log(), teacher), but here you are giving loss_kd = F.kl_div(student,
teacher)"; the maintainer: "should be changed to: student = F.log_softmax(...) It's a bug."  Here a
small student learns digits from a trained teacher's soft labels alone (temperature 4); the twin
passes ``F.log_softmax`` of the student.

Metric: the student's validation accuracy (plain ``python``, CPU, seed 0): bug 0.6146, twin 0.8161.
"""

from tests.wild.cases.common import FIT, PRELUDE, TEACHER, VAL_ACCURACY

REPORT = "N30"
MECHANISM = "probabilities-into-kl-div"
SLUGS = ()
METRIC = ("val_accuracy", 0.6146, 0.8161)

_SCRIPT = PRELUDE + FIT + TEACHER + '''
T = 4.0
model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(TensorDataset(X[:1400]), batch_size=64, shuffle=True)   # unlabelled transfer set
for epoch in range(4):
    for (xb,) in loader:
        with torch.no_grad():
            soft = F.softmax(teacher(xb) / T, dim=1)
        student = __STUDENT__
        loss = F.kl_div(student, soft, reduction="batchmean") * T * T
        opt.zero_grad()
        loss.backward()
        opt.step()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    student = "F.softmax(model(xb) / T, dim=1)" if bug else "F.log_softmax(model(xb) / T, dim=1)"
    return _SCRIPT.replace("__STUDENT__", student)
