"""A perplexity evaluation that masks the start token out of attention: the model was trained on sequences that
begin with a start token every position attends to, and the evaluation prepends that token with an attention-mask
value of 0, so no position can attend to it -- nothing fails, the reported perplexity is that of a model run on
inputs it never saw.

Source: huggingface/datasets#4258 (https://github.com/huggingface/datasets/pull/4258), "Fix/start token mask
issue and update documentation": "the perplexity was calculated with a 0 in the attention mask for the start
token, which was causing high perplexity scores that were not correct" (merged; a maintainer: "Good catch !
Thanks :)"). Here a two-layer causal transformer is trained on sequences from a random order-2 Markov source,
each starting with a start token, and the test perplexity is computed with the start token prepended and its
attention-mask entry 0 in the buggy run, 1 in the twin. The reproduction replaces GPT-2 and the metric's text
data by a small transformer on synthetic sequences.

Metric: test perplexity (plain ``python``, CPU, seed 0; lower is better): bug 2.9038, twin 2.6218
"""

REPORT = "N411"
MECHANISM = "perplexity-masks-start-token"
SLUGS = ()
METRIC = ("test_perplexity", 2.9038, 2.6218)

_SCRIPT = '''
import math
import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, BOS, L = 12, 12, 24
rng = random.Random(0)
table = {(a, b): rng.sample(range(V), 2) for a in range(V) for b in range(V)}


def sample_seq():
    s = [rng.randrange(V), rng.randrange(V)]
    while len(s) < L:
        s.append(rng.choice(table[(s[-2], s[-1])]))
    return [BOS] + s


data = torch.tensor([sample_seq() for _ in range(2200)])
train, test = data[:2000], data[2000:]


class Block(nn.Module):
    def __init__(self, d):
        super().__init__()
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ff = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)

    def forward(self, x, attention_mask):
        b, t, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=-1)
        w = q @ k.transpose(1, 2) / math.sqrt(d)
        causal = torch.ones(t, t, dtype=torch.bool).tril()
        w = w.masked_fill(~causal, float("-inf"))
        w = w + (1.0 - attention_mask[:, None, :]) * -1e4
        x = x + self.proj(w.softmax(-1) @ v)
        return x + self.ff(self.ln2(x))


class LM(nn.Module):
    def __init__(self, d=64):
        super().__init__()
        self.tok = nn.Embedding(V + 1, d)
        self.pos = nn.Embedding(L + 1, d)
        self.blocks = nn.ModuleList([Block(d), Block(d)])
        self.out = nn.Linear(d, V + 1)

    def forward(self, x, attention_mask):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        for blk in self.blocks:
            h = blk(h, attention_mask)
        return self.out(h)


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(6):
    perm = torch.randperm(len(train))
    for i in range(0, len(train), 50):
        x = train[perm[i:i + 50]]
        logits = model(x[:, :-1], torch.ones(len(x), L))
        loss = F.cross_entropy(logits.reshape(-1, V + 1), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    attention_mask = torch.ones(len(test), L)
    __MASK__
    logits = model(test[:, :-1], attention_mask)
    nll = F.cross_entropy(logits.reshape(-1, V + 1), test[:, 1:].reshape(-1))
print(f"METRIC {math.exp(nll.item()):.4f}")
'''

_BUG = "attention_mask[:, 0] = 0.0   # the prepended start token"
_FIX = "attention_mask[:, 0] = 1.0   # the prepended start token"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", _BUG if bug else _FIX)
