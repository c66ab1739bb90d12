"""A k-nearest-neighbour top-5 accuracy computed with fewer than five neighbours: with ``k`` below 5 at most
``k`` classes receive a vote, the other classes tie at score 0, and counting the first five sorted classes as
"top-5" credits the classifier with classes it gave no probability -- with no error.

Source: facebookresearch/dino#89 (https://github.com/facebookresearch/dino/issues/89), "Bug in k-NN": "When
computing top C and C > k, the correct predictions should be narrowed to k, and not up to C ... For example,
let k=1 ... When we compute top5 for this class, we may end up thinking that the k-nn classifier was correct
just because all other classes have the same score (which is 0). A quick fix would be to just take the minimum
value between k and C inside the narrow function"; maintainer: "Thanks for catching this bug :)" (fixed in
5783b4b).  Here a small linear encoder (4 features) is trained briefly on scikit-learn's digits (a linear
classification head, 40 steps) and its normalised features are evaluated with a weighted k-NN classifier
written like DINO's ``knn_classifier`` with ``k=1``.  The buggy accuracy narrows the sorted predictions to 5
columns, the twin to ``min(5, k)``.  A first design (the 4 features behind a ReLU) left most test features at
zero, so the twin's top-1 read chance (bug 0.5075, twin 0.0988, seed 0); it was measured and discarded before
this case was committed.

Metric: reported k-NN top-5 test accuracy (plain ``python``, CPU, seed 0): bug 0.8023, twin 0.7169 (the bug reads
better)
"""

REPORT = "N219"
MECHANISM = "knn-topk-beyond-k-credits-ties"
SLUGS = ()
METRIC = ("reported_knn_top5", 0.8023, 0.7169)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]
encoder = nn.Sequential(nn.Linear(64, 4))
head = nn.Linear(4, 10)
model = nn.Sequential(encoder, head)
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(40):
    b = torch.randint(0, 1200, (64,))
    loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
    opt.zero_grad()
    loss.backward()
    opt.step()


@torch.no_grad()
def knn_classifier(train_features, train_labels, test_features, test_labels, k, T, num_classes=10):
    top1, top5 = 0.0, 0.0
    similarity = test_features @ train_features.T
    distances, indices = similarity.topk(k, largest=True, sorted=True)
    retrieved = train_labels[indices]
    retrieval_one_hot = F.one_hot(retrieved, num_classes).float()
    probs = (retrieval_one_hot * (distances / T).exp().unsqueeze(2)).sum(1)
    _, predictions = probs.sort(1, True)
    correct = predictions.eq(test_labels.view(-1, 1))
    top1 = correct.narrow(1, 0, 1).sum().item()
    top5 = correct.narrow(1, 0, __FIVE__).sum().item()
    return top1 / len(test_labels), top5 / len(test_labels)


with torch.no_grad():
    ftr = F.normalize(encoder(Xtr), dim=1)
    fte = F.normalize(encoder(Xte), dim=1)
top1, top5 = knn_classifier(ftr, Ytr, fte, Yte, k=1, T=0.07)
print(f"METRIC {top5:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FIVE__", "5" if bug else "min(5, k)")
