"""Re-identification scored without the protocol's junk filter: gallery images of the query's identity
taken by the query's own camera are left in the ranking, so near-duplicates of the query count as correct
first matches and rank-1 and mAP are inflated -- with no error.

Source: SiddhantKapil/LA-Transformer#3 (https://github.com/SiddhantKapil/LA-Transformer/issues/3), "The
LA-Transformer test code don't "remove gallery samples that have the same pid and camid with query"":
"The LA-Transformer test code seems not "remove gallery samples that have the same pid and camid with
query" when calculate rank1/rankn/mAP?"; a user: "I replaced the evaluation code and the results are
quite poor. mAP: 0.6875 rank1: 0.8605"; another: "I also observe that camera IDs are not used to compute
CMC and mAP. I think the accuracy scores are wrong."; maintainer: "We will add this evaluation as well.
Thanks for the feedback."  Here an embedding net is trained with an identity-classification loss on
synthetic person features (an identity vector, a strong per-camera appearance shift, the camera's view
of that person, noise) and ranked on
held-out identities seen by four cameras; the buggy ranking keeps every gallery image, the twin drops the
gallery images with the query's identity and camera, as the Market-1501 protocol does.

Metric: the reported rank-1 accuracy on 200 queries (plain ``python``, CPU, seed 0): bug 1.0, twin
0.47 (the bug reads better: the twin is the protocol's number)
"""

REPORT = "N181"
MECHANISM = "same-camera-matches-not-removed"
SLUGS = ()
METRIC = ("reported_rank1", 1.0, 0.47)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
D, CAMS = 32, 4
cam_style = 2.0 * torch.randn(CAMS, D, generator=g)


def people(n_ids, per_cam):
    """Images of n_ids identities from every camera: identity + camera appearance + noise."""
    ident = torch.randn(n_ids, D, generator=g)
    feats, pids, camids = [], [], []
    for p in range(n_ids):
        for c in range(CAMS):
            view = 0.8 * torch.randn(D, generator=g)  # this camera's view of this person
            for _ in range(per_cam):
                feats.append(ident[p] + cam_style[c] + view + 0.3 * torch.randn(D, generator=g))
                pids.append(p)
                camids.append(c)
    return torch.stack(feats), torch.tensor(pids), torch.tensor(camids)


x_train, y_train, _ = people(100, 3)
model = nn.Sequential(nn.Linear(D, 64), nn.ReLU(), nn.Linear(64, 32))
head = nn.Linear(32, 100)
opt = torch.optim.Adam(list(model.parameters()) + list(head.parameters()), lr=3e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(len(x_train))
    for i in range(0, len(x_train), 64):
        idx = perm[i:i + 64]
        loss = F.cross_entropy(head(model(x_train[idx])), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

x_test, pid_test, cam_test = people(50, 3)
query = torch.arange(0, len(x_test), 3)[:200]
gallery = torch.tensor([i for i in range(len(x_test)) if i not in set(query.tolist())])
model.eval()
with torch.no_grad():
    fq = F.normalize(model(x_test[query]), dim=1)
    fg = F.normalize(model(x_test[gallery]), dim=1)
dist = 1 - fq @ fg.T
hits = 0
for qi in range(len(query)):
    q_pid, q_cam = pid_test[query[qi]], cam_test[query[qi]]
    order = dist[qi].argsort()
    g_pid, g_cam = pid_test[gallery[order]], cam_test[gallery[order]]
__KEEP__
    hits += int(g_pid[keep][0] == q_pid)
print(f"METRIC {hits / len(query):.4f}")
'''

_BUG = "    keep = torch.ones_like(g_pid, dtype=torch.bool)"
_TWIN = "    keep = ~((g_pid == q_pid) & (g_cam == q_cam))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__KEEP__", _BUG if bug else _TWIN)
