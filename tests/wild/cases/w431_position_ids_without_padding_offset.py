"""Position ids counted from 0 for a model whose position table starts at ``padding_idx + 1``: RoBERTa-style
embeddings give the n-th token row ``padding_idx + 1 + n`` (rows 0 and ``padding_idx`` are reserved), so a path
that supplies 0-based ids reads every token's position embedding ``padding_idx + 1`` rows early, the first tokens
from rows the model never trained, and the encoder's outputs quietly degrade -- nothing fails.

Source: huggingface/sentence-transformers#3879 (https://github.com/huggingface/sentence-transformers/pull/3879),
"Fix position_ids offsetting for RoBERTa-family models when flattening inputs": "The `position_ids` for that packed
sequence come from `DataCollatorWithFlattening`, which restarts positions at 0 for every sequence. That is correct
for BERT-style embeddings ... but RoBERTa-family architectures compute positions as `padding_idx + 1 + n` for the
n-th token ... When the collator's 0-based ids are passed instead, every token reads a position embedding shifted
by `padding_idx + 1` (usually 2), including reads from the rows reserved for padding. Nothing crashes, the
embeddings are just silently worse" (merged by the maintainer). Here a small RoBERTa-style encoder (learned
position table with ``padding_idx`` 1) is trained, with its own position convention, to tell whether the token at
position 2 is larger than the token at position 7, and is then evaluated through the flattening path's position
ids; the bug passes the collator's 0-based ids, the twin offsets them by ``padding_idx + 1``, as the fix does. The
reproduction replaces a pretrained RoBERTa, flash-attention packing and sentence embeddings by a one-layer encoder
trained here, padded batches with explicit ``position_ids``, and a classification head.

Metric: test accuracy through the flattening path (plain ``python``, CPU, seed 0): bug 0.5120, twin 0.9980
"""

REPORT = "N405"
MECHANISM = "position-ids-without-padding-offset"
SLUGS = ()
METRIC = ("test_accuracy", 0.512, 0.998)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
PAD, V, L = 1, 20, 12
tokens = torch.randint(3, V, (4000, L))
labels = (tokens[:, 2] > tokens[:, 7]).long()


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.tok = nn.Embedding(V, 32, padding_idx=PAD)
        self.pos = nn.Embedding(L + PAD + 1, 32, padding_idx=PAD)
        layer = nn.TransformerEncoderLayer(32, 2, 64, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 1)
        self.head = nn.Linear(32, 2)

    def forward(self, x, position_ids=None):
        if position_ids is None:                      # the model's own convention (RoBERTa)
            position_ids = torch.arange(L)[None] + PAD + 1
        h = self.enc(self.tok(x) + self.pos(position_ids))
        return self.head(h.mean(1))


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(800):
    i = torch.randint(0, 3000, (64,))
    loss = F.cross_entropy(model(tokens[i]), labels[i])
    opt.zero_grad()
    loss.backward()
    opt.step()

# the flattening path: the collator restarts position ids at 0 for every sequence
position_ids = torch.arange(L)[None].expand(1000, L)
__OFFSET__
model.eval()
with torch.no_grad():
    acc = (model(tokens[3000:], position_ids).argmax(1) == labels[3000:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__OFFSET__", "" if bug else "position_ids = position_ids + PAD + 1")
