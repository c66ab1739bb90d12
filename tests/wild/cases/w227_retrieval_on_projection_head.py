"""Nearest-neighbour retrieval with a SimCLR model read out after its projection head: the head's output is
trained to be invariant to the augmentations and throws away what the encoder keeps, so the embedding used
downstream is the worse one and its accuracy falls as training goes on -- with no error.

Source: Lightning-Universe/lightning-bolts#356 (https://github.com/Lightning-Universe/lightning-bolts/issues/356),
"High Accuracy without Training on GPU, Lower accuracy after training" (labels: bug / fix, help wanted): "We
use the embeddings from SimCLR's encoder and pass it through the projection head, resulting in an embedding of
length 128. We search for the nearest neighbor ... With further training the accuracy goes down"; maintainer:
"the 128 dimensional representations out of the projection head are supposed to be invariant to a lot of
transforms and thus not good for downstream tasks. The recommended representations to user are the ones
directly out of the resnet-50 encoder".  Here an MLP encoder and projection head are trained with the NT-Xent
loss on scikit-learn's digits (shifts, pixel dropout and noise as augmentations), and test digits are
classified by their 5 nearest training digits in cosine similarity.  The buggy retrieval embeds with
``head(encoder(x))``, the twin with ``encoder(x)``.

Metric: 5-NN test accuracy (plain ``python``, CPU, seed 0): bug 0.8388, twin 0.8992
"""

REPORT = "N201"
MECHANISM = "retrieval-on-projection-head-output"
SLUGS = ()
METRIC = ("knn_test_accuracy", 0.8388, 0.8992)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1400], Y[:1400], X[1400:], Y[1400:]


def augment(x):
    x = x.view(-1, 8, 8)
    s = torch.randint(-1, 2, (2,)).tolist()
    x = torch.roll(x, shifts=(s[0], s[1]), dims=(1, 2))
    x = x * (torch.rand_like(x) > 0.2) + 0.1 * torch.randn_like(x)
    return x.view(-1, 64)


encoder = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU())
head = nn.Sequential(nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 32))
model = nn.ModuleDict({"encoder": encoder, "head": head})
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 256):
        b = Xtr[perm[i:i + 256]]
        z = F.normalize(head(encoder(torch.cat([augment(b), augment(b)]))), dim=1)
        n = len(b)
        sim = z @ z.T / 0.2
        sim.fill_diagonal_(float("-inf"))
        target = torch.cat([torch.arange(n, 2 * n), torch.arange(n)])
        loss = F.cross_entropy(sim, target)
        opt.zero_grad()
        loss.backward()
        opt.step()


def embed(x):
    return __EMBED__


with torch.no_grad():
    bank, queries = F.normalize(embed(Xtr), dim=1), F.normalize(embed(Xte), dim=1)
    nearest = (queries @ bank.T).topk(5, dim=1).indices
    pred = Ytr[nearest].mode(dim=1).values
print(f"METRIC {(pred == Yte).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__EMBED__", "head(encoder(x))" if bug else "encoder(x)")
