"""Teacher outputs precomputed over one shuffled pass of the training loader and replayed by batch
index in later epochs, whose loader shuffles again: the soft targets of batch ``i`` belong to other
samples, so the student is distilled towards the teacher's opinion of different digits.

Source: haitongli/knowledge-distillation-pytorch#17
(https://github.com/haitongli/knowledge-distillation-pytorch/pull/17, merged), "Fix bug about
teacher output": "The original implementation has bugs. The teacher's output disagree with batch's
labels"; #16: "The original implementation had a bug about the teacher's output. In loss_fn_kd(),
you can compare the argmax index with label to find that. To fix this, I use torch.no_grad to output
teacher and student in the same time." Here a student MLP is distilled from an MLP teacher on digits
with ``0.9 * T^2 * KL(student/T || teacher/T) + 0.1 * CE`` (T = 4), the teacher's outputs computed
once before training by iterating the (shuffled) training loader, then looked up as
``teacher_outputs[i]`` for the i-th batch of every epoch; the twin runs the teacher on the batch at
hand (under ``no_grad``), as the fix does.

Metric: the student's validation accuracy (plain ``python``, CPU, seed 0): bug 0.1159, twin 0.869.
"""

from tests.wild.cases.common import FIT, PRELUDE, TEACHER, VAL_ACCURACY

REPORT = "N68"
MECHANISM = "soft-targets-misaligned"
SLUGS = ()
METRIC = ("val_accuracy", 0.1159, 0.869)

_SCRIPT = PRELUDE + FIT + TEACHER + '''
T, ALPHA = 4.0, 0.9
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
with torch.no_grad():
    teacher_outputs = [teacher(xb) for xb, _ in loader]            # one pass, in that pass's order

model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(5):
    for i, (xb, yb) in enumerate(loader):
        out = model(xb)
__TEACHER__
        kd = F.kl_div(F.log_softmax(out / T, dim=1), F.softmax(t_out / T, dim=1), reduction="batchmean")
        loss = ALPHA * T * T * kd + (1 - ALPHA) * F.cross_entropy(out, yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TEACHER__", "        t_out = teacher_outputs[i]" if bug else
                           "        with torch.no_grad():\n            t_out = teacher(xb)")
