"""Beam search that length-normalises a finished hypothesis by the prompt's length plus the generated length:
for a decoder-only model the prompt is part of the sequence, so with a long prompt the normaliser barely
changes with the generated length, the score is close to the raw sum of log-probabilities, and beams that
stop early win -- with no error.

Source: huggingface/transformers#27351 (https://github.com/huggingface/transformers/pull/27351), "Fix beam
score calculation issue for decoder-only models": "In the original implementation of beam search, the beam
score for decoder-only models is normalized by the total length of both prompt and generated sequence.
However, the length of prompt should not be included in the normalization step. This issue would cause an
unexpected bias towards generating shorter sequences" (merged; fixes #26624, whose reporter measured
"buggy_score = logprob * gen_length / (gen_length + prompt_length - 1)").  Here a next-token model (an
embedding and an MLP) learns six-step answers that follow a successor rule from noisy data (45% of the
steps replaced at random, 15% of the answers cut short), then a hand-written beam search (4 beams, length
penalty 1) answers 200 prompts of 30 filler tokens.  A finished beam's score is its summed log-probability
divided by ``len(prompt) + len(gen)`` in the buggy script and by ``len(gen)`` in the twin.  The report's
model is a pretrained decoder; the search is written like ``BeamHypotheses.add``.

Metric: share of answers equal to the noise-free six-step answer (plain ``python``, CPU, seed 0): bug 0.0000,
twin 1.0000
"""

REPORT = "N237"
MECHANISM = "beam-score-length-includes-prompt"
SLUGS = ()
METRIC = ("beam_exact_match", 0.0000, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
K, STEPS, P = 6, 6, 30
START, EOS, FILL = STEPS * K, STEPS * K + K, STEPS * K + K + 1
V = FILL + 8
succ = torch.randperm(K)


def answer(v, noisy):
    out, val = [], v
    for p in range(STEPS):
        if noisy and p > 0 and torch.rand(()) < 0.15:
            break
        val = succ[val].item()
        tok = val if not (noisy and torch.rand(()) < 0.45) else torch.randint(0, K, ()).item()
        out.append(p * K + tok)
    return out + [EOS]


pairs = []
for _ in range(3000):
    v = torch.randint(0, K, ()).item()
    seq = [START + v] + answer(v, noisy=True)
    pairs += list(zip(seq[:-1], seq[1:]))
src, dst = torch.tensor(pairs).T
model = nn.Sequential(nn.Embedding(V, 32), nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, V))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(src), (256,))
    loss = F.cross_entropy(model(src[i]), dst[i])
    opt.zero_grad()
    loss.backward()
    opt.step()


def beam_search(prompt, beams=4, max_new=8, length_penalty=1.0):
    running, finished = [([], 0.0)], []
    with torch.no_grad():
        for _ in range(max_new):
            cand = []
            for gen, score in running:
                last = (prompt + gen)[-1]
                logp = F.log_softmax(model(torch.tensor([last])), -1)[0]
                top = logp.topk(beams)
                cand += [(gen + [t.item()], score + lp.item()) for lp, t in zip(top.values, top.indices)]
            cand.sort(key=lambda c: c[1], reverse=True)
            running = []
            for gen, score in cand:
                if gen[-1] == EOS:
                    length = __LENGTH__
                    finished.append((gen, score / length ** length_penalty))
                elif len(running) < beams:
                    running.append((gen, score))
            if not running:
                break
    return max(finished, key=lambda f: f[1])[0] if finished else running[0][0]


exact = []
for _ in range(200):
    v = torch.randint(0, K, ()).item()
    prompt = torch.randint(FILL, V, (P,)).tolist() + [START + v]
    exact.append(float(beam_search(prompt) == answer(v, noisy=False)))
print(f"METRIC {sum(exact) / len(exact):.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__LENGTH__', 'len(prompt) + len(gen)' if bug else 'len(gen)')
    return s
