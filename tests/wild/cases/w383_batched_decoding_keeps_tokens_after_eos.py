"""Batched greedy decoding that stops only when every sequence of the batch emits ``eos`` at the same step and keeps
the tokens each sequence generates after its own ``eos``: every sequence shorter than the longest runs on past its end
with whatever the decoder produces after ``eos``, so the returned sequences are wrong although each is right up to
its ``eos`` -- nothing fails.

Source: lucidrains/h-transformer-1d#9 (https://github.com/lucidrains/h-transformer-1d/issues/9), "eos token does not
work in batch mode generation": "When generating the sequence with current code it seems the `eos_token` will work
when generating one sequence at a time"; maintainer: "ohh, this is indeed a bug, and i'll fix this today" (and the
same in x-transformers: "haha yup, i'll fix it there too"). Here a GRU encoder-decoder learns to reverse sequences of
2-7 tokens and end them with ``eos``; 500 test sequences are decoded greedily in one batch of up to 9 steps; the
bug breaks out of the loop when ``(tok == EOS).all()`` and returns the raw tokens, the twin (the fix's approach)
also replaces every token after a sequence's first ``eos`` by padding. The reproduction replaces the
hierarchical-attention language model and its sampling by a small GRU encoder-decoder and greedy decoding.

Metric: exact match of the decoded sequences (padded to 9) with the targets on 500 test sequences (plain ``python``,
CPU, seed 0): bug 0.0000, twin 0.7980
"""

REPORT = "N357"
MECHANISM = "batched-decoding-keeps-tokens-after-eos"
SLUGS = ()
METRIC = ('test_exact_match', 0.0, 0.798)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from torch.nn.utils.rnn import pack_padded_sequence

torch.manual_seed(0)
PAD, EOS, BOS, V, MAXLEN = 0, 1, 2, 11, 9


def batch(n):
    lengths = torch.randint(2, 8, (n,))
    src = torch.full((n, 7), PAD)
    tgt = torch.full((n, MAXLEN), PAD)
    for i, n_i in enumerate(lengths.tolist()):
        seq = torch.randint(3, V, (n_i,))
        src[i, :n_i] = seq
        tgt[i, :n_i] = seq.flip(0)
        tgt[i, n_i] = EOS
    return src, lengths, tgt


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 32)
        self.enc = nn.GRU(32, 96, batch_first=True)
        self.dec = nn.GRU(32, 96, batch_first=True)
        self.out = nn.Linear(96, V)

    def encode(self, src, lengths):
        _, h = self.enc(pack_padded_sequence(self.emb(src), lengths, batch_first=True, enforce_sorted=False))
        return h

    def forward(self, src, lengths, tgt):
        dec_in = torch.cat([torch.full((len(tgt), 1), BOS), tgt[:, :-1]], 1)
        y, _ = self.dec(self.emb(dec_in), self.encode(src, lengths))
        return self.out(y)


def generate(model, src, lengths):
    h = model.encode(src, lengths)
    tok = torch.full((len(src), 1), BOS)
    out = []
    for _ in range(MAXLEN):
        y, h = model.dec(model.emb(tok), h)
        tok = model.out(y).argmax(-1)
        out.append(tok)
        if (tok == EOS).all():
            break
    out = torch.cat(out, 1)
__MASK__    return F.pad(out, (0, MAXLEN - out.shape[1]), value=PAD)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(500):
    src, lengths, tgt = batch(64)
    logits = model(src, lengths, tgt)
    loss = F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1), ignore_index=PAD)
    opt.zero_grad()
    loss.backward()
    opt.step()
torch.manual_seed(1)
src, lengths, tgt = batch(500)
with torch.no_grad():
    gen = generate(model, src, lengths)
em = (gen == tgt).all(1).float().mean().item()
print(f"METRIC {em:.4f}")
'''


def script(bug: bool) -> str:
    mask = ('' if bug else
            '    ended = (out == EOS).long().cumsum(1)\n'
            '    after = (ended - (out == EOS).long()) > 0\n'
            '    out = out.masked_fill(after, PAD)\n')
    return _SCRIPT.replace('__MASK__', mask)
