"""Perplexity computed on padded batches without masking the padding out of the labels: the
model is scored on predicting the pad positions too, and the reported perplexity is a number that
belongs to no text -- with no error.

Source: axolotl-ai-cloud/axolotl#3988 (https://github.com/axolotl-ai-cloud/axolotl/pull/3988),
"fix(perplexity): stop scoring padding in batched references": "`Perplexity.compute` tokenizes with
`padding=True`, then discards the `attention_mask` and never masks pad positions out of the labels
... So with more than one reference of differing length the model attends across pad positions and
is then scored on predicting them, and the number returned is not the perplexity of the text. ...
The size of the error tracks how much padding the batch happens to carry".  Here a GRU language
model is trained (padding ignored) on sentences of 4-30 tokens from a random Markov chain, and its
validation perplexity is computed over padded batches.  The buggy evaluation takes the mean cross
entropy over every position; the twin passes ``ignore_index=PAD``.

Metric: reported validation perplexity (plain ``python``, CPU, seed 0): bug 6.2245, twin 2.4878 (the
twin is the perplexity of the text).
"""

REPORT = "N120"
MECHANISM = "perplexity-scores-padding"
SLUGS = ()
METRIC = ("reported_val_perplexity", 6.2245, 2.4878)

_SCRIPT = '''
import math
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
V, PAD, T, N = 12, 0, 31, 2000  # token 0 is padding, 1-11 are words
transition = torch.softmax(3 * torch.randn(V, V, generator=g), 1)
transition[:, PAD] = 0
transition /= transition.sum(1, keepdim=True)
data = torch.full((N, T), PAD)
for n in range(N):
    length = int(torch.randint(5, T + 1, (1,), generator=g))
    token = int(torch.randint(1, V, (1,), generator=g))
    for t in range(length):
        data[n, t] = token
        token = int(torch.multinomial(transition[token], 1, generator=g))


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.out = nn.Linear(64, V)

    def forward(self, s):
        return self.out(self.rnn(self.emb(s))[0])


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(5):
    for batch in torch.randperm(1600).split(32):
        s = data[batch]
        opt.zero_grad()
        F.cross_entropy(model(s[:, :-1]).reshape(-1, V), s[:, 1:].reshape(-1), ignore_index=PAD).backward()
        opt.step()

model.eval()
total, count = 0.0, 0
with torch.no_grad():
    for s in data[1600:].split(32):
        logits, labels = model(s[:, :-1]).reshape(-1, V), s[:, 1:].reshape(-1)
        scored = __SCORED__
        total += F.cross_entropy(logits, labels, reduction="sum", **scored).item()
        count += int((labels != PAD).sum()) if scored else labels.numel()
print(f"METRIC {math.exp(total / count):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SCORED__", "{}  # every position, padding included" if bug
                           else "{'ignore_index': PAD}  # the text's tokens only")
