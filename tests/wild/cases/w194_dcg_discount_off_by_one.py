"""An NDCG whose position discount is off by one: with 0-based positions the discount is special-cased
to 1 for the first and written ``log2(i + 1)`` after it, so the second position is not discounted at
all and every later one is discounted as the position before it -- the retriever's ranking quality is
overstated, with no error.

Source: OpenAgentHQ/openagent-eval#223 (https://github.com/OpenAgentHQ/openagent-eval/issues/223),
"metrics(ndcg): DCG discount is off by one -- a relevant doc at rank 2 scores a perfect 1.0": "``_dcg``
... computes the position discount as ``log2(i + 1)`` with 0-indexed ``i``, special-casing ``i == 0``
to ``1.0``. Position 2 (``i == 1``) therefore gets discount ``log2(2) = 1.0`` -- the same as position 1,
i.e. no penalty at all ... the metric systematically overstates ranking quality for every consumer"
(closed).  Here a dual-encoder retriever is trained with in-batch softmax on noisy paraphrases of 400
documents' topics and scored by NDCG@10 (one relevant document per query).  The buggy discount is
``(1.0 if i == 0 else math.log2(i + 1))``, the twin's ``math.log2(i + 2)``.

Metric: the reported NDCG@10 on 500 held-out queries (plain ``python``, CPU, seed 0): bug 0.4758, twin
0.4215 (the bug reads better: the twin is the real NDCG)
"""

REPORT = "N168"
MECHANISM = "dcg-discount-off-by-one"
SLUGS = ()
METRIC = ("reported_ndcg_at_10", 0.4758, 0.4215)

_SCRIPT = '''
import math

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
D, DOCS = 32, 400
doc_topics = torch.randn(DOCS, D, generator=g)
docs = doc_topics + 0.5 * torch.randn(DOCS, D, generator=g)  # document features


def queries(n):
    """Each query paraphrases one document's topic, noisily."""
    target = torch.randint(0, DOCS, (n,), generator=g)
    return doc_topics[target] + 2.0 * torch.randn(n, D, generator=g), target


def dcg(relevances):
    return sum(rel / __DISCOUNT__ for i, rel in enumerate(relevances))


def ndcg_at_k(ranked_relevances, k=10):
    ideal = dcg(sorted(ranked_relevances, reverse=True)[:k])
    return dcg(ranked_relevances[:k]) / ideal if ideal > 0 else 0.0


q_enc, d_enc = nn.Linear(D, 64), nn.Linear(D, 64)
model = nn.ModuleList([q_enc, d_enc])
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
x_train, t_train = queries(3000)
#@guard
for epoch in range(3):
    for i in range(0, 3000, 100):
        scores = F.normalize(q_enc(x_train[i:i + 100]), dim=1) @ F.normalize(d_enc(docs), dim=1).T
        loss = F.cross_entropy(scores / 0.05, t_train[i:i + 100])
        opt.zero_grad()
        loss.backward()
        opt.step()

x_val, t_val = queries(500)
with torch.no_grad():
    scores = F.normalize(q_enc(x_val), dim=1) @ F.normalize(d_enc(docs), dim=1).T
    ranking = scores.argsort(dim=1, descending=True)
total = 0.0
for row, tgt in zip(ranking.tolist(), t_val.tolist()):
    total += ndcg_at_k([1.0 if doc == tgt else 0.0 for doc in row])
print(f"METRIC {total / len(t_val):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DISCOUNT__", "(1.0 if i == 0 else math.log2(i + 1))" if bug else "math.log2(i + 2)")
