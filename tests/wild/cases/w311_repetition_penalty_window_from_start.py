"""A repetition penalty given the whole context where it expects the last ``n`` tokens: it counts only the first
``n`` tokens of the list, so it penalises the prompt's opening tokens for the whole generation and never the tokens
just generated -- the sampler repeats itself as if no penalty were set, with no error.

Source: abetlen/llama-cpp-python#1295 (https://github.com/abetlen/llama-cpp-python/pull/1295), "fix last tokens
passing to sample_repetition_penalties function": "currently all previous tokens are passing to
``llama_sample_repetition_penalties`` function instead of last ``penalty_last_n`` tokens ... it will use only first
``penalty_last_n`` tokens" (merged). Here a bigram model is trained on a synthetic corpus with frequent loops and
sampled from 40 prompts of 16 tokens for 60 tokens each, with a penalty of 3.0 over the last 8 tokens written in
Python like llama.cpp's (it reads the first ``penalty_last_n`` entries of the list it is given); the bug passes
all tokens, the twin the last eight. llama.cpp's C sampler is replaced by the Python function.

Metric: the share of sampled tokens that repeat one of the previous eight, lower is better (plain ``python``, CPU,
seed 0): bug 0.4075, twin 0.2033
"""

REPORT = "N285"
MECHANISM = "penalty-window-taken-from-context-start"
SLUGS = ()
METRIC = ("repeat_rate", 0.4075, 0.2033)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, PENALTY, LAST_N = 20, 3.0, 8
P = torch.softmax(torch.randn(V, V), 1)
P = 0.5 * P + 0.5 * torch.eye(V)[torch.randint(0, V, (V,))]
corpus = [torch.randint(0, V, ()).item()]
for _ in range(20000):
    corpus.append(torch.multinomial(P[corpus[-1]], 1).item())
corpus = torch.tensor(corpus)

model = nn.Embedding(V, V)
opt = torch.optim.Adam(model.parameters(), lr=0.1)
#@guard
for step in range(200):
    loss = F.cross_entropy(model(corpus[:-1]), corpus[1:])
    opt.zero_grad()
    loss.backward()
    opt.step()


def sample_repetition_penalties(logits, last_tokens, penalty_last_n, penalty):
    logits = logits.clone()
    for tok in set(last_tokens[:penalty_last_n]):
        logits[tok] = logits[tok] / penalty if logits[tok] > 0 else logits[tok] * penalty
    return logits


gen = torch.Generator().manual_seed(1)
repeats, total = 0, 0
with torch.no_grad():
    for run in range(40):
        tokens = corpus[run * 50: run * 50 + 16].tolist()
        for _ in range(60):
            logits = model.weight[tokens[-1]]
            last = __LAST__
            logits = sample_repetition_penalties(logits, last, LAST_N, PENALTY)
            nxt = torch.multinomial(torch.softmax(logits, 0), 1, generator=gen).item()
            repeats += nxt in tokens[-LAST_N:]
            total += 1
            tokens.append(nxt)
print(f"METRIC {repeats / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__LAST__', 'tokens' if bug else 'tokens[-LAST_N:]')
