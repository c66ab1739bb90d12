"""Label-only distillation of an attacked model trained on the data's own labels instead of the labels
the model returned: the student learns the task, not the teacher, so wherever the teacher errs the
"distilled" copy disagrees with it, and the loss trajectories an attack reads off it track the data
rather than the target model -- with no error.

Source: aidotse/LeakPro#440 (https://github.com/aidotse/LeakPro/pull/440), "fix: distill label-only loss
trajectory on teacher labels, not ground truth": "In label-only mode, the distillation student was
trained with ``CrossEntropyLoss`` against the dataset's **ground-truth labels**
(``distillation_model_handler.py``), so the distilled trajectory tracked the data rather than the
teacher model being attacked. The ``# TODO: I think this is wrong (teacher?)`` on that line already
suspected this" (merged).  Here the attacked model is an MLP trained on 150 private digits; the attacker
queries its hard labels on 1200 digits of its own and distils a student on them.  The buggy script
trains the student on ``y_dist`` (the data's labels), the twin on ``teacher_labels``.

Metric: student-teacher agreement on 397 unseen digits (plain ``python``, CPU, seed 0): bug 0.796, twin
0.9295
"""

REPORT = "N166"
MECHANISM = "distillation-targets-are-data-labels"
SLUGS = ()
METRIC = ("teacher_agreement", 0.796, 0.9295)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)


def mlp():
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


# the attacked (target) model: trained on its own small private set, so it errs in its own ways
teacher = mlp()
t_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
for step in range(150):
    loss = F.cross_entropy(teacher(X[:150]), Y[:150])
    t_opt.zero_grad()
    loss.backward()
    t_opt.step()
teacher.eval()

# label-only distillation: the attacker queries the teacher for hard labels on its own data
x_dist, y_dist = X[200:1400], Y[200:1400]
with torch.no_grad():
    teacher_labels = teacher(x_dist).argmax(1)
targets = __TARGETS__

student = mlp()
opt = torch.optim.Adam(student.parameters(), lr=3e-3)
#@guard
for epoch in range(20):
    for i in range(0, len(x_dist), 64):
        loss = F.cross_entropy(student(x_dist[i:i + 64]), targets[i:i + 64])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():  # how well the distilled student imitates the teacher on unseen inputs
    agree = (student(X[1400:]).argmax(1) == teacher(X[1400:]).argmax(1)).float().mean().item()
print(f"METRIC {agree:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TARGETS__", "y_dist" if bug else "teacher_labels")
