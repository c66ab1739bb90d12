"""A continual few-shot learner that makes its copy of the classifier weights inside the loop over support sets, so
each support set starts again from the initial weights and the target set is classified by what the last support set
taught alone -- the classes of the earlier sets are forgotten, nothing fails.

Source: AntreasAntoniou/FewShotContinualLearning#2 (https://github.com/AntreasAntoniou/FewShotContinualLearning/pull/2):
``names_weights_copy`` is created inside the support-set loop, so "target set will be evaluated only on the weight
updates of the last support set" (merged, with runs before and after). Here a digits MLP is pretrained on 1300
digits and its hidden layer kept as the backbone; each of 200 tasks shows three support sets of two new classes each
(five shots, held-out digits), a zero-initialised six-way linear head is adapted with five gradient steps (rate 1.0)
per support set, and the target set holds five queries of each of the six classes; the bug re-copies the initial head
at the start of every support set, the twin once per task. The reproduction has no outer meta-learning loop (the
backbone is pretrained, not meta-learned).

Metric: target-set accuracy over 200 tasks (plain ``python``, CPU, seed 0): bug 0.3270, twin 0.6378
"""

REPORT = "N378"
MECHANISM = "fast-weights-reset-per-support-set"
SLUGS = ()
METRIC = ('target_accuracy', 0.327, 0.6378)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
trX, trY, teX, teY = X[perm[:1300]], y[perm[:1300]], X[perm[1300:]], y[perm[1300:]]
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):                      # pretraining of the backbone
    idx = torch.randint(0, len(trY), (64,))
    loss = F.cross_entropy(model(trX[idx]), trY[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
backbone = model[:2]
with torch.no_grad():
    mean_feat = backbone(trX).mean(0)


def embed(x):
    return F.normalize(backbone(x) - mean_feat, dim=1)


init_classifier = {'weight': torch.zeros(6, 64), 'bias': torch.zeros(6)}


def episode(n_sets=3, ways=2, shots=5, queries=5):
    classes = torch.randperm(10)[:n_sets * ways]
    support, tx, ty = [], [], []
    for s in range(n_sets):
        xs, ys = [], []
        for j in range(ways):
            k = s * ways + j
            idx = (teY == classes[k]).nonzero().flatten()
            idx = idx[torch.randperm(len(idx))[:shots + queries]]
            xs.append(teX[idx[:shots]])
            ys.append(torch.full((shots,), k))
            tx.append(teX[idx[shots:]])
            ty.append(torch.full((queries,), k))
        support.append((torch.cat(xs), torch.cat(ys)))
    return support, torch.cat(tx), torch.cat(ty)


correct = total = 0
for task in range(200):
    support, tx, ty = episode()
    names_weights_copy = {k: v.clone().requires_grad_() for k, v in init_classifier.items()}
    for xs, ys in support:
__COPY__        with torch.no_grad():
            feats = embed(xs)
        for _ in range(5):
            loss = F.cross_entropy(F.linear(feats, names_weights_copy['weight'], names_weights_copy['bias']), ys)
            grads = torch.autograd.grad(loss, list(names_weights_copy.values()))
            names_weights_copy = {k: (v - 1.0 * g).detach().requires_grad_()
                                  for (k, v), g in zip(names_weights_copy.items(), grads)}
    with torch.no_grad():
        logits = F.linear(embed(tx), names_weights_copy['weight'], names_weights_copy['bias'])
        correct += (logits.argmax(1) == ty).sum().item()
        total += len(ty)
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    copy = ('        names_weights_copy = {k: v.clone().requires_grad_() for k, v in init_classifier.items()}\n'
            if bug else '')
    return _SCRIPT.replace('__COPY__', copy)
