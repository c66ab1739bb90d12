"""Elastic weight consolidation whose Fisher diagonal is the square of the gradient of the batch's
mean log-likelihood instead of the mean of the per-sample squared gradients: at the end of training
the mean gradient is close to zero, so every weight looks unimportant, the penalty holds nothing and
the first task is forgotten -- with no error.

Source: kuc2477/pytorch-ewc#1 (https://github.com/kuc2477/pytorch-ewc/issues/1), "The computation of
fisher matrix": "The computation for fisher matrix should be the average of the gradient^2. But in
your implementation. you did the average of the loss, then only use that averaged loss to calculate
the gradient and estimate the fisher matrix"; maintainer: "You're right. Diagonals of the fisher
matrix is an expected value of the squared gradients of log-likelihoods, not squared expected
gradients of log-likelihoods. I've fixed it".  Here an MLP learns task A (digits) and then task B
(the same digits with their pixels permuted) with an EWC penalty (lambda 100) anchored at the task-A
weights; the Fisher is estimated on 200 task-A digits from the batch mean (bug) or per sample (twin).

Metric: task-A accuracy on the 397 held-out digits after training on task B (plain ``python``, CPU,
seed 0): bug 0.6599, twin 0.8489
"""

REPORT = "N145"
MECHANISM = "fisher-from-mean-gradient"
SLUGS = ()
METRIC = ("task_a_accuracy_after_b", 0.6599, 0.8489)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm_pixels = torch.randperm(64)
tasks = {"A": X, "B": X[:, perm_pixels]}

model = nn.Sequential(nn.Linear(64, 100), nn.ReLU(), nn.Linear(100, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
#@guard


def train(x, penalty=None, epochs=15):
    for epoch in range(epochs):
        order = torch.randperm(1400)
        for i in range(0, 1400, 32):
            b = order[i:i + 32]
            loss = F.cross_entropy(model(x[b]), Y[b])
            if penalty is not None:
                loss = loss + penalty()
            opt.zero_grad()
            loss.backward()
            opt.step()


def fisher_diagonal(x, y):
    fisher = [torch.zeros_like(p) for p in model.parameters()]
    __FISHER__
    return fisher


def accuracy(x):
    with torch.no_grad():
        return (model(x[1400:]).argmax(1) == Y[1400:]).float().mean().item()


train(tasks["A"])
anchor = [p.detach().clone() for p in model.parameters()]
fisher = fisher_diagonal(tasks["A"][:200], Y[:200])
lam = 100.0


def ewc_penalty():
    return lam / 2 * sum((f * (p - a) ** 2).sum() for f, p, a in zip(fisher, model.parameters(), anchor))


train(tasks["B"], penalty=ewc_penalty)
print(f"task B accuracy {accuracy(tasks['B']):.4f}")
print(f"METRIC {accuracy(tasks['A']):.4f}")
'''

_BATCH_MEAN = """loglik = F.log_softmax(model(x), dim=1)[torch.arange(len(y)), y].mean()
    grads = torch.autograd.grad(loglik, list(model.parameters()))
    fisher = [g ** 2 for g in grads]"""

_PER_SAMPLE = """for i in range(len(y)):
        loglik = F.log_softmax(model(x[i:i + 1]), dim=1)[0, y[i]]
        grads = torch.autograd.grad(loglik, list(model.parameters()))
        fisher = [f + g ** 2 / len(y) for f, g in zip(fisher, grads)]"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FISHER__", _BATCH_MEAN if bug else _PER_SAMPLE)
