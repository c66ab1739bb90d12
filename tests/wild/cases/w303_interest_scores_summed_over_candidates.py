"""A multi-interest retrieval model whose list-wise scores are summed over the candidate axis instead of the
embedding axis: ``(best_interest * items).sum(dim=1)`` gives one number per embedding dimension, the soft-max loss
then runs over embedding dimensions with "class 0" as the target, and the item embeddings never learn to rank the
positive item first -- with no error.

Source: datawhalechina/torch-rechub#221 (https://github.com/datawhalechina/torch-rechub/issues/221), "Bug in forward
function of mind model": "``y = torch.mul(best_interest_emb, item_embedding).sum(dim=1)  (batch_size, embed_dim)``
is wrong, it should be ``.sum(dim=-1)  (batch_size, 1+n_neg_items)``"; maintainer: "Thank you for pointing out the
bug. The relevant modifications have been updated". Here users prefer two of twenty synthetic item clusters; a
MIND-like model (mean of the history, a linear layer to two interests, the interest closest to the positive item)
is trained with one positive and nine random negatives per user; the bug sums over ``dim=1``, the twin over
``dim=-1``. The capsule routing of MIND is replaced by the linear layer.

Metric: hit rate at 5 among 50 candidates for held-out users, scored by the best interest (plain ``python``, CPU, seed
0): bug 0.1160, twin 0.4910
"""

REPORT = "N277"
MECHANISM = "listwise-scores-reduced-over-candidate-axis"
SLUGS = ()
METRIC = ("test_hit_at_5", 0.1160, 0.4910)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
N_ITEMS, N_CLUSTERS, D, K, N_NEG, HIST = 400, 20, 16, 2, 9, 6
item_cluster = torch.arange(N_ITEMS) % N_CLUSTERS


def sample_users(n):
    prefs = torch.stack([torch.randperm(N_CLUSTERS)[:2] for _ in range(n)])
    pick = prefs[torch.arange(n)[:, None], torch.randint(0, 2, (n, HIST + 1))]
    items = pick + N_CLUSTERS * torch.randint(0, N_ITEMS // N_CLUSTERS, pick.shape)
    return items[:, :HIST], items[:, HIST]


class MIND(nn.Module):
    def __init__(self):
        super().__init__()
        self.item_emb = nn.Embedding(N_ITEMS, D)
        self.interest = nn.Linear(D, K * D)

    def user_interests(self, hist):
        return self.interest(self.item_emb(hist).mean(1)).view(-1, K, D)

    def forward(self, hist, cand):
        user_embedding = self.user_interests(hist)
        item_embedding = self.item_emb(cand)
        pos = item_embedding[:, 0, :]
        k_index = (user_embedding * pos[:, None, :]).sum(-1).argmax(1)
        best_interest_emb = user_embedding[torch.arange(len(hist)), k_index].unsqueeze(1)
        y = torch.mul(best_interest_emb, item_embedding).sum(dim=__DIM__)
        return y


model = MIND()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(400):
    hist, target = sample_users(128)
    cand = torch.cat([target[:, None], torch.randint(0, N_ITEMS, (128, N_NEG))], 1)
    loss = F.cross_entropy(model(hist, cand), torch.zeros(128, dtype=torch.long))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    hist, target = sample_users(1000)
    cand = torch.cat([target[:, None], torch.randint(0, N_ITEMS, (1000, 49))], 1)
    scores = (model.user_interests(hist)[:, :, None, :] * model.item_emb(cand)[:, None]).sum(-1).max(1).values
    hit = (scores.topk(5, 1).indices == 0).any(1).float().mean().item()
print(f"METRIC {hit:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__DIM__', '1' if bug else '-1')
