"""Sequence classification that pools the hidden state at index ``attention_mask.sum(1) - 1``, the
last real token only when padding is on the right, on batches padded on the left: for every sequence
shorter than its batch's longest the classifier reads a padding position or a token in the middle.

Source: huggingface/peft#3620 (https://github.com/huggingface/peft/issues/3620), "[Bug] ShadowPEFT
sequence classification pools the wrong token with left padding": "it derives the index as
`attention_mask.sum(dim=1) - 1` ... The current index expression selects positions 1 and 2,
producing `[20, 30]`. Both are incorrect for these left-padded rows" and "the auxiliary
sequence-classification loss trains against a padding position" (fixed in #3629).  Here a GRU reads
token sequences of length 3-12, left padded, and the class is given by the last token; the buggy
pooling indexes ``mask.sum(1) - 1``, the twin the rightmost non-padding position.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.33, twin 1.0.
"""

REPORT = "N81"
MECHANISM = "pooling-index-ignores-padding-side"
SLUGS = ()
METRIC = ("val_accuracy", 0.33, 1.0)

_SCRIPT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
PAD, VOCAB, CLASSES = 0, 24, 4


def examples(n, seed):
    rng = random.Random(seed)
    seqs = [[rng.randrange(1, VOCAB) for _ in range(rng.randrange(3, 13))] for _ in range(n)]
    return seqs, torch.tensor([s[-1] % CLASSES for s in seqs])


def left_pad(seqs):
    width = max(len(s) for s in seqs)
    ids = torch.full((len(seqs), width), PAD)
    for row, s in enumerate(seqs):
        ids[row, width - len(s):] = torch.tensor(s)
    return ids, (ids != PAD).long()


def last_token_index(mask):
    return __INDEX__


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.head = nn.Linear(64, CLASSES)

    def forward(self, ids, mask):
        hidden = self.rnn(self.embed(ids))[0]
        pooled = hidden[torch.arange(len(ids)), last_token_index(mask)]
        return self.head(pooled)


model = Classifier()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
seqs, labels = examples(1600, seed=1)
for epoch in range(4):
    for k in range(0, len(seqs), 32):
        ids, mask = left_pad(seqs[k:k + 32])
        opt.zero_grad()
        F.cross_entropy(model(ids, mask), labels[k:k + 32]).backward()
        opt.step()

model.eval()
val_seqs, val_labels = examples(400, seed=2)
correct = 0
with torch.no_grad():
    for k in range(0, len(val_seqs), 32):
        ids, mask = left_pad(val_seqs[k:k + 32])
        correct += (model(ids, mask).argmax(1) == val_labels[k:k + 32]).sum().item()
print(f"METRIC {correct / len(val_seqs):.4f}")
'''

_BUG = "mask.sum(dim=1) - 1                                       # right padding's last token"
_FIX = "(torch.arange(mask.shape[1]) * mask).argmax(dim=1)        # the rightmost non-padding token"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__INDEX__", _BUG if bug else _FIX)
