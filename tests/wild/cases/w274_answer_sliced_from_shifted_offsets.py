"""An extractive-QA evaluation that slices the predicted answer out of the context with token offsets that
start one character into the word: the answer text loses its first letter, and exact match against the
gold answers collapses while the model's predictions are right -- with no error.

Source: EuroEval/EuroEval#2173 (https://github.com/EuroEval/EuroEval/pull/2173), "fix: restore leading letters
dropped by RobBERT QA offsets": "`find_valid_answers` rebuilt the predicted answer by slicing the context with
the tokenizer `offset_mapping`. RobBERT-family models use `Sequence[Whitespace, ByteLevel, Punctuation]` ...
so a word-initial token's start offset is one character into the word. The slice then drops the first letter
(`Amsterdam` -> `msterdam`) and SQuAD Exact Match on `squad-nl` collapses (RobBERT-2023-base: EM 8 vs 46.7
on DUMB). The reconstruction now fills only a non-whitespace hole that is not already covered by the previous
in-context token." (merged after review).  Here a word-level tokenizer gives offsets with the same quirk, a
small reader learns to point at the word that follows the question's word in a 12-word context, and the
evaluation rebuilds the answer from the offsets: the buggy script slices them as they are, the twin fills the
hole as the fix does.  The reader predicts one token (start = end); RobBERT's subword tokens are not
reproduced.

Metric: reported exact match on 500 test questions (plain ``python``, CPU, seed 0): bug 0.0000, twin 0.9860
"""

REPORT = "N248"
MECHANISM = "answer-span-offsets-drop-first-character"
SLUGS = ()
METRIC = ("reported_exact_match", 0.0000, 0.9860)

_SCRIPT = '''import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
random.seed(0)
letters = "abcdefghijklmnopqrstuvwxyz"
words = sorted({"".join(random.choice(letters) for _ in range(random.randint(3, 7))) for _ in range(300)})
index = {w: i for i, w in enumerate(words)}


def tokenize(text):
    """Word-level tokens with character offsets; like the report's tokenizer, a word-initial token's
    start offset points one character into the word."""
    ids, offsets, pos = [], [], 0
    for w in text.split(" "):
        ids.append(index[w])
        offsets.append((pos + 1, pos + len(w)))
        pos += len(w) + 1
    return ids, offsets


def example():
    ctx = random.sample(words, 12)
    k = random.randrange(11)
    return " ".join(ctx), ctx[k], ctx[k + 1], k + 1


class Reader(nn.Module):
    def __init__(self):
        super().__init__()
        self.prev = nn.Embedding(len(words) + 1, 32)
        self.question = nn.Embedding(len(words), 32)

    def forward(self, ids, q):
        prev = torch.cat([torch.full((ids.shape[0], 1), len(words)), ids[:, :-1]], 1)
        return (self.prev(prev) * self.question(q)[:, None]).sum(-1)


train = [example() for _ in range(3000)]
ids = torch.tensor([tokenize(c)[0] for c, _, _, _ in train])
qs = torch.tensor([index[k] for _, k, _, _ in train])
starts = torch.tensor([s for _, _, _, s in train])
model = Reader()
opt = torch.optim.Adam(model.parameters(), lr=3e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(train), (128,))
    loss = F.cross_entropy(model(ids[i], qs[i]), starts[i])
    opt.zero_grad()
    loss.backward()
    opt.step()


def answer_text(context, offsets, s, e):
    start, end = offsets[s][0], offsets[e][1]
__FILL__
    return context[start:end]


exact = []
with torch.no_grad():
    for _ in range(500):
        context, key, gold, _ = example()
        tok, offsets = tokenize(context)
        s = model(torch.tensor([tok]), torch.tensor([index[key]])).argmax(1).item()
        exact.append(float(answer_text(context, offsets, s, s) == gold))
print(f"METRIC {sum(exact) / len(exact):.4f}")
'''


_FILL = """    prev_end = offsets[s - 1][1] if s > 0 else 0
    while start > prev_end and not context[start - 1].isspace():
        start -= 1
"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FILL__\n", "" if bug else _FILL)
