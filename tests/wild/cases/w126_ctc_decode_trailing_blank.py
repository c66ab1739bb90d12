"""Greedy CTC decoding that handles the last pair of frames on its own and appends the final frame
without checking it against the blank: a sequence that ends in exactly one blank frame decodes with
the blank id as an extra final token, and its transcript no longer matches.

Source: obadx/quran-muaalem#37 (https://github.com/obadx/quran-muaalem/pull/37, merged; fixes #34),
"Fix ctc_decode emitting the blank id as a final token": "When the last two ids differ, it appends
`next` without checking it against `blank_id` ... So a sequence ending in exactly one blank keeps
that blank as a decoded token, and downstream it becomes the literal `[PAD]` ... We hit this on a
batch transcription run: 53 clips came back with `[PAD]` inside `phonemes.text`."  Here a small
frame classifier is trained with ``nn.CTCLoss`` on synthetic utterances (noisy per-frame features of
3-5 symbols, each held 2-3 frames, blanks between, one or two trailing blank frames); the buggy
decoder has the report's final-pair branch, the twin checks the final frame against the blank.

Metric: share of validation utterances decoded exactly (plain ``python``, CPU, seed 0): bug 0.445,
twin 0.995.
"""

REPORT = "N100"
MECHANISM = "ctc-decode-keeps-blank"
SLUGS = ()
METRIC = ("val_exact_transcripts", 0.445, 0.995)

_SCRIPT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
BLANK, SYMBOLS, D = 0, 6, 12
centres = torch.randn(SYMBOLS + 1, D, generator=torch.Generator().manual_seed(3))


def utterances(n, seed):
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        labels = [rng.randrange(1, SYMBOLS + 1) for _ in range(rng.randrange(3, 6))]
        frames = [BLANK] * rng.randrange(1, 3)
        for s in labels:
            frames += [s] * rng.randrange(2, 4) + [BLANK] * rng.randrange(1, 3)
        feats = centres[torch.tensor(frames)] + 0.4 * torch.randn(len(frames), D, generator=g)
        out.append((feats, labels))
    return out


def ctc_decode(ids):
    """Collapse repeats and drop blanks; the last pair of frames is handled on its own."""
    tokens = []
    for idx in range(len(ids) - 1):
        curr, nxt = ids[idx], ids[idx + 1]
        if curr != nxt and curr != BLANK:
            tokens.append(curr)
    curr, nxt = ids[-2], ids[-1]
    if curr == nxt:
        if curr != BLANK:
            tokens.append(curr)
    else:
__LAST__
    return tokens


model = nn.Sequential(nn.Linear(D, 32), nn.ReLU(), nn.Linear(32, SYMBOLS + 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
ctc = nn.CTCLoss(blank=BLANK)
#@guard
train = utterances(300, seed=1)
for epoch in range(5):
    for feats, labels in train:
        log_probs = F.log_softmax(model(feats), dim=-1)[:, None]
        loss = ctc(log_probs, torch.tensor([labels]), torch.tensor([len(feats)]), torch.tensor([len(labels)]))
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
val = utterances(200, seed=2)
exact = 0
with torch.no_grad():
    for feats, labels in val:
        exact += int(ctc_decode(model(feats).argmax(-1).tolist()) == labels)
print(f"METRIC {exact / len(val):.4f}")
'''

_BUG = "        tokens.append(nxt)                                     # appended even when it is the blank"
_FIX = "        if nxt != BLANK:\n            tokens.append(nxt)"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LAST__", _BUG if bug else _FIX)
