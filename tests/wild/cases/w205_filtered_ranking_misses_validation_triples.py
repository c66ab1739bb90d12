"""Filtered link-prediction ranking whose filter holds the training and test triples but not the
validation ones: true tails that only appear in the validation split still count as corruptions ranked
above the test tail, so filtered MRR and hits@k are understated -- with no error.

Source: pykeen/pykeen#397 (https://github.com/pykeen/pykeen/issues/397), "Filtered MRR/hits/ranks miss
validation triplets" (labels: bug): "we propose to remove from the list of corrupted triplets all the
triplets that appear either in the training, validation or test set (except the test triplet of interest)
... the size of _all_pos_triples_ was actually the size of train set plus test set size ... `all_pos_triples
= torch.cat([model.triples_factory.mapped_triples, mapped_triples], dim=0)` ... Test both-avg MRR of the
learned model is 0.664, however, after adding validation data into _all_pos_triples_ it turns to 0.802".
Here a 1-N link predictor (entity, entity-type and relation embeddings, an MLP, dot products with every
entity) is
trained on a graph where each relation maps a group of four entities onto another group, the four true
tails of each query split two for training, one for validation and one for test.  The buggy filter is
``train + test``; the twin's is ``train + validation + test``.

Metric: filtered MRR of the tail rankings of the test triples (plain ``python``, CPU, seed 0): bug 0.6887,
twin 0.8559
"""

REPORT = "N179"
MECHANISM = "filter-set-misses-validation-triples"
SLUGS = ()
METRIC = ("filtered_test_mrr", 0.6887, 0.8559)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
GROUPS, R, D = 60, 3, 32
E = GROUPS * 4
train, val, test = [], [], []
for h in range(E):
    for r in range(R):
        target = (h // 4 * 7 + r * 13 + 1) % GROUPS
        tails = (target * 4 + torch.randperm(4, generator=g)).tolist()
        train += [(h, r, tails[0]), (h, r, tails[1])]
        val.append((h, r, tails[2]))
        test.append((h, r, tails[3]))
train, val, test = torch.tensor(train), torch.tensor(val), torch.tensor(test)

ent, grp, rel = nn.Embedding(E, D), nn.Embedding(GROUPS, D), nn.Embedding(R, D)
proj = nn.Sequential(nn.Linear(2 * D, 64), nn.ReLU(), nn.Linear(64, D))
model = nn.ModuleList([ent, grp, rel, proj])
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
all_entities = torch.arange(E)


def entity(e):
    """An entity's own embedding plus its (known) type group's."""
    return ent(e) + grp(e // 4)


def tail_scores(h, r):
    return proj(torch.cat([entity(h), rel(r)], -1)) @ entity(all_entities).T


#@guard
for epoch in range(40):
    perm = torch.randperm(len(train))
    for i in range(0, len(train), 128):
        b = train[perm[i:i + 128]]
        loss = F.cross_entropy(tail_scores(b[:, 0], b[:, 1]), b[:, 2])
        opt.zero_grad()
        loss.backward()
        opt.step()

__FILTER__
known = {}
for h, r, t in all_pos_triples.tolist():
    known.setdefault((h, r), set()).add(t)
with torch.no_grad():
    scores = tail_scores(test[:, 0], test[:, 1])
rr = []
for row, (h, r, t) in zip(scores, test.tolist()):
    row = row.clone()
    others = [x for x in known[(h, r)] if x != t]
    row[others] = float("-inf")
    rr.append(1.0 / (1 + (row > row[t]).sum().item()))
print(f"METRIC {sum(rr) / len(rr):.4f}")
'''

_BUG = "all_pos_triples = torch.cat([train, test], dim=0)"
_TWIN = "all_pos_triples = torch.cat([train, val, test], dim=0)"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FILTER__", _BUG if bug else _TWIN)
