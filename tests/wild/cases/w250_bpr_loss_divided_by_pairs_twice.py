"""A BPR loss averaged over the pairs twice: ``log_prob`` is already a mean over the batch's pairs, and the
return statement divides it by ``n_pairs`` again together with the regularisation term -- so the loss
trained is not the one the model documents (the ranking term ``n_pairs`` times smaller, and the L2 penalty
``n_pairs`` times heavier against it than the fix has it) -- with no error.

Source: pyg-team/pytorch_geometric#7196 (https://github.com/pyg-team/pytorch_geometric/issues/7196),
"BPRLoss implementation in torch_geometric.nn.models.lightgcn" (labels: bug): "In BPRLoss(_Loss)::forward,
`log_prob` is divided by `n_pairs` twice: the first time in F.logsigmoid(positives - negatives).mean(), and
the second time in the return clause. I suggest changing the return clause to: `return -log_prob +
regularization / n_pairs`"; maintainer: "I think you are absolutely correct".  Here a LightGCN (two propagation
layers over a synthetic user-item graph of 300 users and 200 items in 5 taste clusters) is trained with
PyG's BPR loss (``lambda_reg`` 1e-4, the L2 norm of the batch's initial embeddings) on batches of 512 triples.
The buggy loss returns ``(-log_prob + regularization) / n_pairs``, the twin ``-log_prob + regularization /
n_pairs``.

Metric: test recall@10 (plain ``python``, CPU, seed 0): bug 0.2750, twin 0.2162 (the bug reads better: under
Adam the common factor ``1 / n_pairs`` barely changes the steps, and what remains is a penalty ``n_pairs``
times heavier against the ranking term, which here regularises the small graph's embeddings usefully; the
report's point is that the loss is not the documented one, not that it trains worse)
"""

REPORT = "N224"
MECHANISM = "bpr-loss-averaged-twice"
SLUGS = ()
METRIC = ("test_recall_at_10", 0.2750, 0.2162)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
U, I, G = 300, 200, 5
ucl, icl = torch.randint(0, G, (U,)), torch.randint(0, G, (I,))
prob = torch.where(ucl.unsqueeze(1) == icl.unsqueeze(0), 0.15, 0.005)
inter = torch.rand(U, I) < prob
test_mask = inter & (torch.rand(U, I) < 0.2)
train = inter & ~test_mask
tu, ti = train.nonzero(as_tuple=True)
A = torch.zeros(U + I, U + I)
A[tu, U + ti] = 1
A[U + ti, tu] = 1
deg = A.sum(1).clamp(min=1)
A_hat = A / deg.sqrt().unsqueeze(0) / deg.sqrt().unsqueeze(1)


class LightGCN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(U + I, 32)
        nn.init.normal_(self.emb.weight, std=0.1)

    def forward(self):
        h = self.emb.weight
        out = [h]
        for _ in range(2):
            h = A_hat @ h
            out.append(h)
        return torch.stack(out).mean(0)


def bpr_loss(pos, neg, parameters, lambda_reg=1e-4):
    n_pairs = pos.size(0)
    log_prob = F.logsigmoid(pos - neg).mean()
    regularization = lambda_reg * parameters.norm(p=2).pow(2)
    return __RETURN__


model = LightGCN()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    b = torch.randint(0, len(tu), (512,))
    u, p, n = tu[b], ti[b], torch.randint(0, I, (512,))
    z = model()
    pos = (z[u] * z[U + p]).sum(1)
    neg = (z[u] * z[U + n]).sum(1)
    params = torch.cat([model.emb(u), model.emb(U + p), model.emb(U + n)])
    loss = bpr_loss(pos, neg, params)
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    z = model()
    scores = z[:U] @ z[U:].T
    scores[train] = float("-inf")
    top = scores.topk(10, 1).indices
    hits = test_mask.gather(1, top).sum(1).float()
    has = test_mask.sum(1) > 0
    recall = (hits[has] / test_mask.sum(1)[has].clamp(max=10)).mean()
print(f"METRIC {recall.item():.4f}")
'''


def script(bug: bool) -> str:
    ret = "(-log_prob + regularization) / n_pairs" if bug else "-log_prob + regularization / n_pairs"
    return _SCRIPT.replace("__RETURN__", ret)
