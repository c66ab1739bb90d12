"""MLM corruption that writes random tokens first and then fills ``[MASK]`` over the masked positions, random ones
included: nine in ten random replacements are overwritten, so about 1% of the masked tokens stay random instead of
10%, and the model rarely learns to correct a wrong token that carries no ``[MASK]`` -- with no error.

Source: lucidrains/mlm-pytorch#6 (https://github.com/lucidrains/mlm-pytorch/issues/6), "Order of random token
replacement and mask filling": "most of the random word replacement (the probability of this intersection is
``random_token_prob * replace_prob``) ... will be overwritten by the mask filling"; maintainer: "Thank you for
catching this, I believe you are correct" (fixed in 0.1.0). Here a bidirectional GRU is pretrained with MLM (15% of
positions, ``replace_prob`` 0.9, ``random_token_prob`` 0.1, as in the repository) on sequences from a sparse Markov
chain, and tested on sequences where 15% of the tokens were replaced by random tokens with no ``[MASK]``: it must
predict the original token at those positions; the bug fills ``[MASK]`` over the random positions as the repository
did, the twin leaves them (the 0.1.0 fix). The repository's transformer is replaced by the GRU.

Metric: test accuracy of restoring randomly replaced tokens (plain ``python``, CPU, seed 0): bug 0.7325, twin
0.8176
"""

REPORT = "N303"
MECHANISM = "random-replacements-overwritten-by-mask-fill"
SLUGS = ()
METRIC = ("test_restore_accuracy", 0.7325, 0.8176)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, LEN, MASK_ID = 30, 24, 30
MASK_PROB, REPLACE_PROB, RANDOM_PROB = 0.15, 0.9, 0.1
successors = torch.randint(0, VOCAB, (VOCAB, 2))


def sequences(n):
    seq = torch.zeros(n, LEN, dtype=torch.long)
    seq[:, 0] = torch.randint(0, VOCAB, (n,))
    for t in range(1, LEN):
        seq[:, t] = successors[seq[:, t - 1], torch.randint(0, 2, (n,))]
    return seq


def prob_mask_like(t, prob):
    return torch.rand(t.shape) < prob


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB + 1, 48)
        self.rnn = nn.GRU(48, 64, batch_first=True, bidirectional=True)
        self.out = nn.Linear(128, VOCAB)

    def forward(self, x):
        return self.out(self.rnn(self.emb(x))[0])


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
for step in range(400):
    seq = sequences(64)
    mask = prob_mask_like(seq, MASK_PROB)
    masked_seq = seq.clone()
    random_token_prob = prob_mask_like(seq, RANDOM_PROB) & mask
    masked_seq = torch.where(random_token_prob, torch.randint(0, VOCAB, seq.shape), masked_seq)
    replace = prob_mask_like(seq, REPLACE_PROB) & mask
    __FILL__
    masked_seq = masked_seq.masked_fill(replace, MASK_ID)
    loss = F.cross_entropy(model(masked_seq)[mask], seq[mask])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    seq = sequences(1000)
    corrupt = prob_mask_like(seq, MASK_PROB)
    noisy = torch.where(corrupt, torch.randint(0, VOCAB, seq.shape), seq)
    changed = corrupt & (noisy != seq)
    acc = (model(noisy).argmax(-1)[changed] == seq[changed]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__FILL__', 'pass' if bug else 'replace = replace & ~random_token_prob')
