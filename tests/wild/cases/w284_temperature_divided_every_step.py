"""Sampling logits divided by the temperature inside the decoding loop, in place on a tensor the loop keeps: each
position divides the remaining logits again, so the effective temperature is ``T ** k`` at the k-th position: with
``T < 1`` the later positions are sampled almost greedily, with ``T > 1`` almost uniformly -- with no error.

Source: Adibvafa/CodonTransformer#19 (https://github.com/Adibvafa/CodonTransformer/issues/19), in
``sample_non_deterministic`` the line ``logits /= temperature`` sits inside the loop over positions of a
non-autoregressive output, so temperature scaling compounds (labels: bug; fixed by #20, merged: "Ensures that
temperature scaling is applied only once"). Here a small model predicts a token distribution per position for 24
positions (the per-position target distributions are learned from samples), and sequences are sampled at
temperature 1.5 from the logits of all positions computed at once; the metric is the mean total-variation distance
between the sampled tokens' per-position frequencies and the data's distributions at temperature 1.5
(``softmax(log p / T)``). The buggy loop divides the whole logits tensor in place at every position, the twin
divides each position's logits once.

Metric: mean total-variation distance of the samples from the data at temperature 1.5 (plain ``python``, CPU, seed
0): bug 0.3564, twin 0.0345
"""

REPORT = "N258"
MECHANISM = "temperature-applied-once-per-position"
SLUGS = ()
METRIC = ("sample_tv_distance", 0.3564, 0.0345)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
P, V, T = 24, 8, 1.5
true = F.softmax(2.0 * torch.randn(P, V), dim=1)
data = torch.multinomial(true.repeat(2000, 1), 1).view(2000, P)

model = nn.Sequential(nn.Embedding(P, 32), nn.ReLU(), nn.Linear(32, V))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
pos = torch.arange(P)
#@guard
for step in range(300):
    i = torch.randint(0, len(data), (64,))
    logits = model(pos).expand(64, P, V)
    loss = F.cross_entropy(logits.reshape(-1, V), data[i].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    logits = model(pos).expand(4000, P, V).clone()
    samples = torch.empty(4000, P, dtype=torch.long)
    for k in range(P):
        __SCALE__
        samples[:, k] = torch.multinomial(probs, 1).squeeze(1)
freq = F.one_hot(samples, V).float().mean(0)
intended = F.softmax(true.log() / T, dim=1)
print(f"METRIC {0.5 * (freq - intended).abs().sum(1).mean().item():.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        s = "logits /= T\n        probs = F.softmax(logits[:, k], dim=-1)"
    else:
        s = "probs = F.softmax(logits[:, k] / T, dim=-1)"
    return _SCRIPT.replace('__SCALE__', s)
