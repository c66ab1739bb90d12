"""Class prototypes computed as the sum of the support embeddings divided by the number of classes in the episode
instead of the number of support examples per class: every prototype is scaled by ``n_support / n_way``, so the
squared Euclidean distances from a query to the prototypes no longer compare the query with class means, and
few-shot accuracy drops -- the prototypes have the right shape and training runs.

Source: Hsankesara/Prototypical-Networks#2 (https://github.com/Hsankesara/Prototypical-Networks/issues/2), "Query
regarding computation of centroid vector": "Why is the sum divided by Nc (No. of classes per episode) instead of
Ns (No.of samples per class) while calculating centroid vector?"; maintainer: "You're right that it should be Ns. I
have missed it and it is bad from my side. I'll update it soon." Here a prototypical network (an MLP embedding)
is trained on 7-way 10-shot episodes of the digits 0-6 and evaluated on 3-way 10-shot episodes of the unseen digits
7-9; the prototype is ``emb.sum(dim=1) / n_way`` (the bug) or ``/ n_support`` (the twin). The reproduction departs
from the report in the data (digits instead of Omniglot) and the episode sizes (7-way and 3-way 10-shot instead of
60-way 5-shot).

Metric: mean query accuracy over 300 test episodes (plain ``python``, CPU, seed 0): bug 0.4140, twin 0.7222
"""

REPORT = "N440"
MECHANISM = "class-prototype-mean-divided-by-way"
SLUGS = ()
METRIC = ("test_episode_accuracy", 0.4140, 0.7222)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
g = torch.Generator().manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)
TRAIN_CLASSES, TEST_CLASSES = list(range(7)), [7, 8, 9]
N_SUPPORT, N_QUERY = 10, 5


def episode(classes, n_way):
    """An n-way episode: N_SUPPORT support and N_QUERY query images per class, classes drawn from `classes`."""
    chosen = [classes[i] for i in torch.randperm(len(classes), generator=g)[:n_way]]
    support, query = [], []
    for c in chosen:
        idx = torch.nonzero(Y == c).squeeze(1)
        idx = idx[torch.randperm(len(idx), generator=g)[:N_SUPPORT + N_QUERY]]
        support.append(X[idx[:N_SUPPORT]])
        query.append(X[idx[N_SUPPORT:]])
    return torch.stack(support), torch.cat(query), torch.arange(n_way).repeat_interleave(N_QUERY)


def proto_logits(encoder, support, query):
    n_way, n_support = support.shape[:2]
    emb = encoder(support.flatten(0, 1)).view(n_way, n_support, -1)
    prototypes = emb.sum(dim=1) / __DIVISOR__
    return -torch.cdist(encoder(query), prototypes).pow(2)


model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 32))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(600):
    support, query, target = episode(TRAIN_CLASSES, n_way=7)
    loss = F.cross_entropy(proto_logits(model, support, query), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
correct = total = 0
with torch.no_grad():
    for _ in range(300):
        support, query, target = episode(TEST_CLASSES, n_way=3)
        correct += (proto_logits(model, support, query).argmax(1) == target).sum().item()
        total += len(target)
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DIVISOR__", "n_way" if bug else "n_support")
