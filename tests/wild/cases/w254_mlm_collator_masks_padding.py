"""A masked-language-modelling collator that lets padding tokens be chosen for masking: the special-tokens
mask no longer covers the padding, so pad positions are masked, become prediction targets, are trivially
predicted, and fill the reported masked-token accuracy -- with no error.

Source: huggingface/transformers#11155 (https://github.com/huggingface/transformers/issues/11155), "[BUG] padding
tokens are also masked in DataCollatorForLanguageModeling": "The bug is introduced in this PR (#8308). 3 lines
(241-243) are removed by mistake ... Now padding tokens are also masked in MLM", with a reproduction script.
Here a one-layer transformer encoder is trained with masked-token prediction on synthetic sentences of 6 to
24 tokens drawn from a first-order chain over 30 tokens, padded to 24; the collator picks 15% of positions
(80% replaced by the mask token, 10% by a random token, 10% kept), sets every other label to -100, and the
training loop reports the accuracy over the labelled positions of held-out batches.  The buggy collator
excludes only the special tokens from masking, the twin also the padding (``probability_matrix.masked_fill_(
padding_mask, 0.0)``, the removed lines).

Metric: reported masked-token accuracy on held-out batches (plain ``python``, CPU, seed 0): bug 0.4995, twin
0.2343 (the bug reads better)
"""

REPORT = "N228"
MECHANISM = "mlm-collator-masks-padding"
SLUGS = ()
METRIC = ("reported_mlm_accuracy", 0.4995, 0.2343)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, PAD, MASK, L = 30, 30, 31, 24
trans = torch.softmax(torch.randn(V, V) * 3, 1)


def sentences(n):
    x = torch.full((n, L), PAD)
    for i in range(n):
        length = int(torch.randint(6, L + 1, ()))
        tok = int(torch.randint(0, V, ()))
        for t in range(length):
            x[i, t] = tok
            tok = int(torch.multinomial(trans[tok], 1))
    return x


def collate(x):
    labels = x.clone()
    probability_matrix = torch.full(x.shape, 0.15)
    padding_mask = x == PAD
    __PADMASK__
    masked = torch.bernoulli(probability_matrix).bool()
    labels[~masked] = -100
    inputs = x.clone()
    replace = torch.bernoulli(torch.full(x.shape, 0.8)).bool() & masked
    inputs[replace] = MASK
    rand = torch.bernoulli(torch.full(x.shape, 0.5)).bool() & masked & ~replace
    inputs[rand] = torch.randint(0, V, x.shape)[rand]
    return inputs, labels


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V + 2, 48)
        self.pos = nn.Parameter(torch.randn(L, 48) * 0.02)
        self.layer = nn.TransformerEncoderLayer(48, 4, 96, dropout=0.0, batch_first=True)
        self.out = nn.Linear(48, V + 2)

    def forward(self, x):
        return self.out(self.layer(self.emb(x) + self.pos))


train, held = sentences(1500), sentences(300)
model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for step in range(250):
    inputs, labels = collate(train[torch.randint(0, 1500, (64,))])
    loss = F.cross_entropy(model(inputs).reshape(-1, V + 2), labels.reshape(-1), ignore_index=-100)
    opt.zero_grad()
    loss.backward()
    opt.step()

correct = total = 0
with torch.no_grad():
    for s in range(0, 300, 50):
        inputs, labels = collate(held[s:s + 50])
        pred = model(inputs).argmax(-1)
        keep = labels != -100
        correct += (pred[keep] == labels[keep]).sum().item()
        total += keep.sum().item()
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    line = "pass" if bug else "probability_matrix.masked_fill_(padding_mask, value=0.0)"
    return _SCRIPT.replace("__PADMASK__", line)
