"""Mean pooling over a packed recurrent encoder that unsorts the outputs but not the lengths: the batch is
sorted by length for ``pack_padded_sequence``, the outputs are put back in the batch's order, and the sum over
time is divided by the *sorted* lengths -- so each sentence is divided by another sentence's length and its
embedding is scaled by a factor that depends on the rest of the batch, with no error.

Source: facebookresearch/InferSent#51 (https://github.com/facebookresearch/InferSent/issues/51), "Two pooling
issues": "`sent_len` is not unsorted before used for normalization. At Line 46 `sent_len` is sorted from
biggest to smallest, and the input embeddings are adjusted accordingly. At Line 61 the hidden states are
rearranged into the original order, while `sent_len` is not. This might lead to incorrect normalization of
mean-pooling"; maintainer: "thanks for spotting that, I added an option in the models.py ... to fix this".
Here a BiLSTM encoder written like InferSent's (sort, pack, unpack, unsort, mean-pool) regresses a sentence
score on synthetic sentences (the balance of positive and negative words per word, a SICK-R-like regression
target that the pooled vector must carry in its magnitude).  The buggy pooling divides by the sorted
``sent_len``, the twin by the lengths in batch order.

Metric: test mean squared error (plain ``python``, CPU, seed 0): bug 0.0364, twin 0.0003 (lower is better)
"""

REPORT = "N203"
MECHANISM = "pooling-lengths-left-in-sorted-order"
SLUGS = ()
METRIC = ("test_mse", 0.0364, 0.0003)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)


def make(n):
    seqs, scores = [], []
    for _ in range(n):
        length = int(torch.randint(3, 31, (1,), generator=g))
        words = torch.randint(1, 31, (length,), generator=g)  # 1-10 positive, 11-20 negative, 21-30 neutral
        pos, neg = ((words <= 10).sum()), ((words > 10) & (words <= 20)).sum()
        seqs.append(words)
        scores.append(float(pos - neg) / length)
    lengths = torch.tensor([len(s) for s in seqs])
    return nn.utils.rnn.pad_sequence(seqs, batch_first=True), lengths, torch.tensor(scores)


Xtr, Ltr, Ytr = make(1500)
Xte, Lte, Yte = make(400)


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(31, 16, padding_idx=0)
        self.lstm = nn.LSTM(16, 16, batch_first=True, bidirectional=True)
        self.out = nn.Linear(32, 1)

    def forward(self, x, sent_len):
        sent_len, idx_sort = torch.sort(sent_len, descending=True)
        idx_unsort = torch.argsort(idx_sort)
        packed = pack_padded_sequence(self.emb(x[idx_sort]), sent_len, batch_first=True)
        out, _ = pad_packed_sequence(self.lstm(packed)[0], batch_first=True)
        out = out[idx_unsort]
        __UNSORT__
        pooled = out.sum(1) / sent_len.unsqueeze(1).float()
        return self.out(pooled).squeeze(1)


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(6):
    perm = torch.randperm(len(Ytr))
    for i in range(0, len(perm), 64):
        b = perm[i:i + 64]
        loss = F.mse_loss(model(Xtr[b], Ltr[b]), Ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

sq = 0.0
with torch.no_grad():
    perm = torch.randperm(len(Yte))
    for i in range(0, len(perm), 64):
        b = perm[i:i + 64]
        sq += ((model(Xte[b], Lte[b]) - Yte[b]) ** 2).sum().item()
print(f"METRIC {sq / len(Yte):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__UNSORT__", "pass" if bug else "sent_len = sent_len[idx_unsort]")
