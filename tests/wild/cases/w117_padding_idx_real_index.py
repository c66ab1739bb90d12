"""An embedding table built with ``padding_idx=0`` although index 0 is a real entity: that row is
pinned at zero and gets no gradient, so every query about relation 0 scores all candidates 0 and its
answers are a tie broken by position.

Source: ibalazevic/TuckER#17 (https://github.com/ibalazevic/TuckER/issues/17), "Why set
\\"padding_idx=0\\" in nn.Embedding": ``self.R = torch.nn.Embedding(len(d.relations), d2,
padding_idx=0)`` -- "this will lead the gradient of the first entity and relation becoming zero";
maintainer: "Thanks for pointing this out. This is a mistake and should be fixed."  Here a DistMult
link predictor (score of (h, r, t) = sum of e_h * w_r * e_t) is trained on a synthetic knowledge
graph of 40 entities in 5 groups and 3 relations (relation r links group g to group g + r + 1); the
buggy relation table has ``padding_idx=0``, the twin none.

Metric: validation hits@1 counted as the predicted tail being in the right group (plain ``python``,
CPU, seed 0): bug 0.45, twin 0.6167.
"""

REPORT = "N91"
MECHANISM = "padding-index-is-real-entity"
SLUGS = ()
METRIC = ("val_group_hits_at_1", 0.45, 0.6167)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
E, R, G = 40, 3, 5
group = torch.arange(E) % G
g = torch.Generator().manual_seed(1)
triples = []
for h in range(E):
    for r in range(R):
        tails = torch.nonzero(group == (group[h] + r + 1) % G).flatten()
        for t in tails[torch.randperm(len(tails), generator=g)[:3]]:
            triples.append((h, r, t.item()))
triples = torch.tensor(triples)
perm = torch.randperm(len(triples), generator=g)
train, val = triples[perm[:-60]], triples[perm[-60:]]


class DistMult(nn.Module):
    def __init__(self):
        super().__init__()
        self.E = nn.Embedding(E, 16)
        self.R = nn.Embedding(R, 16__PADDING__)

    def forward(self, h, r):
        return (self.E(h) * self.R(r)) @ self.E.weight.t()          # scores of every tail


model = DistMult()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    opt.zero_grad()
    F.cross_entropy(model(train[:, 0], train[:, 1]), train[:, 2]).backward()
    opt.step()

model.eval()
with torch.no_grad():
    pred = model(val[:, 0], val[:, 1]).argmax(1)
print(f"METRIC {(group[pred] == group[val[:, 2]]).float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PADDING__", ", padding_idx=0" if bug else "")
