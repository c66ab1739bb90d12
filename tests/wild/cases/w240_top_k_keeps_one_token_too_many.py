"""Top-k filtering with an off-by-one comparison: the sampler removes tokens ranked ``> k`` instead of
``>= k`` (counting from 0), so ``top_k=1`` -- meant as greedy decoding -- keeps two tokens and samples between
them, and every top-k setting keeps k + 1 tokens -- with no error.

Source: kingoflolz/mesh-transformer-jax#164 (https://github.com/kingoflolz/mesh-transformer-jax/issues/164),
"top-k sampling off by 1 bug": "I think top-k sampling is currently incorrect. Using the test block ... with
`top_k=1` ... (note the 2 non-negative values). A simple fix would be ... `jnp.where(indices_range >= top_k,
...)`"; maintainer: "Thanks! fixed in d2c2f59".  Here a next-token model (an embedding and an MLP) is trained
on sequences of 16 tokens that follow a fixed successor rule with 20% random tokens, then 200 continuations of
20 tokens are sampled with ``top_k=1`` through a filter written like the report's (ranks from an argsort,
tokens with rank above the threshold set to ``-inf``).  The buggy filter keeps ``rank <= top_k``, the twin
``rank < top_k``.

Metric: share of sampled continuations that follow the successor rule exactly (plain ``python``, CPU, seed 0):
bug 0.6350, twin 1.0000
"""

REPORT = "N214"
MECHANISM = "top-k-filter-keeps-k-plus-one"
SLUGS = ()
METRIC = ("greedy_exact_match", 0.6350, 1.0000)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V = 16
succ = torch.randperm(V)


def make(n, length=16):
    seq = torch.zeros(n, length, dtype=torch.long)
    seq[:, 0] = torch.randint(0, V, (n,))
    for t in range(1, length):
        noise = torch.rand(n) < 0.2
        seq[:, t] = torch.where(noise, torch.randint(0, V, (n,)), succ[seq[:, t - 1]])
    return seq


data = make(2000)
model = nn.Sequential(nn.Embedding(V, 32), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, V))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(200):
    b = data[torch.randint(0, len(data), (128,))]
    loss = F.cross_entropy(model(b[:, :-1]).reshape(-1, V), b[:, 1:].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()


def top_k_filter(logits, top_k):
    ranks = logits.argsort(-1, descending=True).argsort(-1)
    return logits.masked_fill(ranks __CMP__ top_k, float("-inf"))


start = torch.randint(0, V, (200,))
tok, exact = start, torch.ones(200, dtype=torch.bool)
with torch.no_grad():
    for t in range(20):
        probs = F.softmax(top_k_filter(model(tok), top_k=1), -1)
        nxt = torch.multinomial(probs, 1).squeeze(1)
        exact &= nxt == succ[tok]
        tok = nxt
print(f"METRIC {exact.float().mean().item():.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__CMP__", ">" if bug else ">=")
