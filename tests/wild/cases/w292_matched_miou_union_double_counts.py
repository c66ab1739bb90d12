"""A Hungarian-matched mIoU whose union is the sum of the two mask sizes: the intersection is counted twice in the
denominator, so every IoU is reported too low (a perfect match scores 0.5) -- with no error.

Source: pairlab/SlotFormer#7 (https://github.com/pairlab/SlotFormer/pull/7), a fix of the evaluation's matched
mIoU, whose union was computed as the sum of the predicted and ground-truth mask sizes without subtracting the
intersection (merged; the maintainer re-ran the reported numbers). Here a small convolutional network segments
noisy synthetic images of three squares (one per vertical band; one output channel per object and one for the
background, trained with a per-pixel cross-entropy); the test masks are matched to the objects with ``scipy``'s
Hungarian solver on the IoU and the matched IoUs averaged. The buggy union is ``|P| + |G|``, the twin ``|P| + |G|
- |P & G|``. The training is the same in both; only the reported number differs.

Metric: the reported matched test mIoU (plain ``python``, CPU, seed 0): bug 0.4261, twin 0.7500
"""

REPORT = "N266"
MECHANISM = "union-counts-intersection-twice"
SLUGS = ()
METRIC = ("test_miou", 0.4261, 0.7500)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from scipy.optimize import linear_sum_assignment

torch.manual_seed(0)
S, K = 22, 4


def scenes(n):
    seg = torch.zeros(n, S, S, dtype=torch.long)
    yy, xx = torch.meshgrid(torch.arange(S), torch.arange(S), indexing="ij")
    for k in range(1, K):
        y0 = torch.randint(0, S - 6, (n, 1, 1))
        x0 = 7 * (k - 1) + torch.randint(0, 2, (n, 1, 1))
        inside = (yy >= y0) & (yy < y0 + 6) & (xx >= x0) & (xx < x0 + 6)
        seg[inside] = k
    x = (seg > 0).float() + 0.8 * torch.randn(n, S, S)
    return x[:, None], seg


def matched_miou(pred, seg):
    scores = []
    for p, g in zip(pred, seg):
        P = F.one_hot(p, K).permute(2, 0, 1)[1:].float().flatten(1)
        G = F.one_hot(g, K).permute(2, 0, 1)[1:].float().flatten(1)
        inter = P @ G.T
        union = __UNION__
        iou = inter / union.clamp(min=1)
        rows, cols = linear_sum_assignment(-iou.numpy())
        scores.append(iou[rows, cols].mean().item())
    return sum(scores) / len(scores)


x_tr, s_tr = scenes(600)
x_te, s_te = scenes(100)
yy, xx = torch.meshgrid(torch.linspace(-1, 1, S), torch.linspace(-1, 1, S), indexing="ij")
coords = torch.stack([yy, xx])[None]
model = nn.Sequential(nn.Conv2d(3, 16, 5, padding=2), nn.ReLU(), nn.Conv2d(16, 16, 5, padding=2), nn.ReLU(),
                      nn.Conv2d(16, K, 1))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(120):
    i = torch.randint(0, len(x_tr), (32,))
    inp = torch.cat([x_tr[i], coords.expand(len(i), 2, S, S)], 1)
    loss = F.cross_entropy(model(inp), s_tr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    pred = model(torch.cat([x_te, coords.expand(len(x_te), 2, S, S)], 1)).argmax(1)
print(f"METRIC {matched_miou(pred, s_te):.4f}")
'''


def script(bug: bool) -> str:
    u = 'P.sum(1)[:, None] + G.sum(1)[None, :]'
    return _SCRIPT.replace('__UNION__', u if bug else u + ' - inter')
