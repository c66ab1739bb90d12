"""DeiT's hard distillation loss applied to the class token's logits instead of the distillation token's: both
losses train the class head, the distillation head receives no gradient at all, and the prediction read from the
distillation token stays at its initialisation -- with no error.

Source: lucidrains/vit-pytorch#138 (https://github.com/lucidrains/vit-pytorch/issues/138): the distillation wrapper
computed the teacher's hard-label loss on the student's class-token output where DeiT uses the distillation token's;
maintainer: "you are right ... fixed". Here a student with a shared MLP trunk and two heads (class token and
distillation token) learns 5 Gaussian classes from labels with 30% noise, next to a teacher trained on clean labels,
with DeiT's loss ``0.5 * CE(class_logits, y) + 0.5 * CE(dist_logits, teacher.argmax(1))``; the bug passes the class
logits to the second term. The ViT with its two tokens is replaced by the trunk with two heads.

Metric: test accuracy of the distillation head (DeiT reports it on its own) (plain ``python``, CPU, seed 0): bug
0.2065, twin 0.9625
"""

REPORT = "N291"
MECHANISM = "distillation-loss-on-class-token"
SLUGS = ()
METRIC = ("test_distill_head_accuracy", 0.2065, 0.9625)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
CLASSES, DIM = 5, 8
centres = torch.randn(CLASSES, DIM) * 1.5


def batch(n, noise=0.0):
    y = torch.randint(0, CLASSES, (n,))
    x = centres[y] + torch.randn(n, DIM)
    flip = torch.rand(n) < noise
    return x, torch.where(flip, torch.randint(0, CLASSES, (n,)), y), y


teacher = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, CLASSES))
t_opt = torch.optim.Adam(teacher.parameters(), lr=1e-2)
for step in range(200):
    x, _, y = batch(128)
    t_loss = F.cross_entropy(teacher(x), y)
    t_opt.zero_grad()
    t_loss.backward()
    t_opt.step()


class Student(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU())
        self.cls_head = nn.Linear(64, CLASSES)
        self.dist_head = nn.Linear(64, CLASSES)

    def forward(self, x):
        h = self.trunk(x)
        return self.cls_head(h), self.dist_head(h)


model = Student()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    x, noisy, _ = batch(128, noise=0.3)
    with torch.no_grad():
        teacher_labels = teacher(x).argmax(1)
    cls_logits, dist_logits = model(x)
    loss = 0.5 * F.cross_entropy(cls_logits, noisy) + 0.5 * F.cross_entropy(__DIST__, teacher_labels)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x, _, y = batch(4000)
    acc = (model(x)[1].argmax(1) == y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__DIST__', 'cls_logits' if bug else 'dist_logits')
