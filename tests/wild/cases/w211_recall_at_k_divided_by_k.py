"""A recall@k that divides the hits in the top k by k instead of by the number of relevant documents: it
is precision@k under recall's name, so with several relevant documents per query the "recall" at small k
is several times too high -- with no error.

Source: jina-ai/serve#1123 (https://github.com/jina-ai/serve/issues/1123), "Bug in RecallEvaluator" (labels:
kind/bug): "Given the relevant docs, `[0, 1, 2, 3, 4]`, and the retrieved docs, `[1, 0, 20, 30, 40]`, the
recall@k is as below ... expected recall@k 0.2 ... current recall@k 1 ... The `Recall@k` should be the number
of relevant results in the top k retrieved results divided by the number of all the relevant results.";
maintainer: "Great catch! How did I miss it!".  Here a dual encoder is trained with in-batch softmax on
noisy paraphrases of 100 topics, each topic with 5 relevant documents among 500, and evaluated by
recall@2 over 300 held-out queries.  The buggy evaluator divides the hits by ``k``, the twin by the number
of relevant documents.

Metric: the reported recall@2 (plain ``python``, CPU, seed 0): bug 0.6217, twin 0.2487 (the bug reads
better: the twin is the real recall)
"""

REPORT = "N185"
MECHANISM = "recall-normalised-by-k"
SLUGS = ()
METRIC = ("reported_recall_at_2", 0.6217, 0.2487)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
D, TOPICS, PER = 32, 100, 5
topics = torch.randn(TOPICS, D, generator=g)
doc_topic = torch.arange(TOPICS).repeat_interleave(PER)
docs = topics[doc_topic] + 0.7 * torch.randn(TOPICS * PER, D, generator=g)


def queries(n):
    t = torch.randint(0, TOPICS, (n,), generator=g)
    return topics[t] + 1.5 * torch.randn(n, D, generator=g), t


def recall_at_k(retrieved, relevant, k):
    hits = len(set(retrieved[:k]) & set(relevant))
__DENOM__


q_enc, d_enc = nn.Linear(D, 64), nn.Linear(D, 64)
model = nn.ModuleList([q_enc, d_enc])
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
x_train, t_train = queries(3000)
#@guard
for epoch in range(3):
    for i in range(0, 3000, 100):
        d = F.normalize(d_enc(docs), dim=1)
        q = F.normalize(q_enc(x_train[i:i + 100]), dim=1)
        topic_scores = torch.logsumexp((q @ d.T / 0.05).view(-1, TOPICS, PER), dim=2)
        loss = F.cross_entropy(topic_scores, t_train[i:i + 100])
        opt.zero_grad()
        loss.backward()
        opt.step()

x_val, t_val = queries(300)
with torch.no_grad():
    ranking = (F.normalize(q_enc(x_val), dim=1) @ F.normalize(d_enc(docs), dim=1).T).argsort(1, descending=True)
total = 0.0
for row, topic in zip(ranking.tolist(), t_val.tolist()):
    relevant = [i for i in range(TOPICS * PER) if doc_topic[i] == topic]
    total += recall_at_k(row, relevant, 2)
print(f"METRIC {total / len(t_val):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DENOM__", "    return hits / k" if bug else "    return hits / len(relevant)")
