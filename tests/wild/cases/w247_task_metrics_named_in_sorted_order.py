"""Per-task metrics of a multi-task model named by the sorted task names but computed in the order the tasks
were created: when the tasks were not created in alphabetical order, each task's metric is reported under
another task's name -- with no error.

Source: NVIDIA-Merlin/models#750 (https://github.com/NVIDIA-Merlin/models/issues/750), "[BUG] Multi-task
learning metrics inconsistent due to a mismatch or tasks and metrics order" (labels: bug, P1, S3): "When
training multi-task learning models the tasks metrics names values are some times shuffled ...
`"conversion/binary_classification_task_auc": <click_auc_result>, "click/binary_classification_task_auc":
<conversion_auc_result>` ... The issue happens when the order with which `PredictionTask` are created do not
match their task names sorted order".  Here a two-head MLP predicts a click (frequent, well predicted by the
features) and a conversion (rare, weakly predicted) on synthetic recommendation data, the conversion task
created first; the evaluation computes one AUC per task head in creation order and names them.  The buggy
evaluation zips the values with ``sorted(task_names)``, the twin with the task names in creation order.

Metric: the click AUC as reported (plain ``python``, CPU, seed 0): bug 0.8150, twin 0.9397
"""

REPORT = "N221"
MECHANISM = "task-metrics-named-in-sorted-order"
SLUGS = ()
METRIC = ("reported_click_auc", 0.8150, 0.9397)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
n, dim = 4000, 12
X = torch.randn(n, dim)
click = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * torch.randn(n) > 0.3).float()
conversion = ((X[:, 2] + 2.0 * torch.randn(n) > 2.2) & (click > 0)).float()
labels = {"conversion": conversion, "click": click}
tasks = ["conversion", "click"]  # creation order
tr, te = slice(0, 3000), slice(3000, n)

model = nn.ModuleDict({"body": nn.Sequential(nn.Linear(dim, 32), nn.ReLU()),
                       "heads": nn.ModuleList(nn.Linear(32, 1) for _ in tasks)})
opt = torch.optim.Adam(model.parameters(), lr=1e-2)


def forward(x):
    h = model["body"](x)
    return [head(h).squeeze(1) for head in model["heads"]]


def auc(score, y):
    pos, neg = score[y > 0], score[y == 0]
    return (pos.unsqueeze(1) > neg.unsqueeze(0)).float().mean().item()


#@guard
for step in range(300):
    b = torch.randint(0, 3000, (256,))
    outs = forward(X[tr][b])
    loss = sum(F.binary_cross_entropy_with_logits(o, labels[t][tr][b]) for o, t in zip(outs, tasks))
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    outs = forward(X[te])
values = [auc(o, labels[t][te]) for o, t in zip(outs, tasks)]
names = __NAMES__
metrics = {f"{name}/binary_classification_task_auc": v for name, v in zip(names, values)}
print(f"METRIC {metrics['click/binary_classification_task_auc']:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__NAMES__", "sorted(tasks)" if bug else "tasks")
