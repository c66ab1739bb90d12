"""A dense retriever trained to score by dot product and evaluated by cosine similarity: the
lengths of the document vectors, which the model used to carry how likely each document is to be
the answer, are divided away, and retrieval gets worse -- with no error.

Source: facebookresearch/ReasonIR#15 (https://github.com/facebookresearch/ReasonIR/issues/15),
"Incorrect use of cosine similarity in retrieval_contriever implementation": "The `Contriever`
model inherently uses `dot product` to calculate similarity, and using cosine similarity will
leads to lower results. `scores = cosine_similarity(query_emb, doc_emb)`"; maintainers: "Good catch!
We have rerun the main experiments ... with `dot product` instead of `cosine similarity`, and the
performance is indeed better. The scores went from 11.1 -> 14.9".  Here 300 documents with
16 features are asked for by noisy queries, popular documents far more often than others (Zipf,
exponent 1.5); a two-tower model (documents: their features plus a learned vector per document) is
trained with a softmax over all documents on dot-product scores.  The buggy
evaluation ranks by ``F.cosine_similarity``, the twin by the dot product it was trained with.

Metric: recall@1 on fresh queries (plain ``python``, CPU, seed 0): bug 0.4377, twin 0.5183.
"""

REPORT = "N119"
MECHANISM = "retrieval-similarity-mismatch"
SLUGS = ()
METRIC = ("test_recall_at_1", 0.4377, 0.5183)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N_DOCS, F_DIM = 300, 16
doc_features = torch.randn(N_DOCS, F_DIM, generator=g)
popularity = 1.0 / torch.arange(1, N_DOCS + 1).float() ** 1.5  # a few documents are asked for far more often
popularity = popularity[torch.randperm(N_DOCS, generator=g)]


def queries(n, gen):
    target = torch.multinomial(popularity, n, replacement=True, generator=gen)
    return doc_features[target] + 3.0 * torch.randn(n, F_DIM, generator=gen), target


q_train, t_train = queries(20000, g)
q_test, t_test = queries(3000, torch.Generator().manual_seed(2))

query_tower = nn.Sequential(nn.Linear(F_DIM, 64), nn.ReLU(), nn.Linear(64, 32))
doc_mlp = nn.Sequential(nn.Linear(F_DIM, 64), nn.ReLU(), nn.Linear(64, 32))
doc_id = nn.Embedding(N_DOCS, 32)  # each document also has its own learned vector
nn.init.zeros_(doc_id.weight)


def doc_tower(features):
    return doc_mlp(features) + doc_id.weight


model = nn.ModuleList([query_tower, doc_mlp, doc_id])
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(8):
    for batch in torch.randperm(len(q_train)).split(256):
        scores = query_tower(q_train[batch]) @ doc_tower(doc_features).T  # dot product over every document
        opt.zero_grad()
        F.cross_entropy(scores, t_train[batch]).backward()
        opt.step()

with torch.no_grad():
    q, d = query_tower(q_test), doc_tower(doc_features)
    scores = __SCORE__
    recall = (scores.argmax(1) == t_test).float().mean().item()
print(f"METRIC {recall:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORE__", "F.cosine_similarity(q[:, None, :], d[None, :, :], dim=-1)" if bug
                           else "q @ d.T")
