"""A step-by-step decoder that passes the initial hidden state to its RNN at every step and drops the state the
RNN returns: each step sees only the encoder's summary and the previous token, so the decoder has no memory of
what it has already written -- it trains and decodes, with no error, as a worse model.

Source: pytorch/examples#88 (https://github.com/pytorch/examples/issues/88), OpenNMT example: the decoder loop
called ``output, h = self.rnn(emb_t, hidden)`` without carrying ``h`` into the next step; the reporter's
perplexities improved once the state was carried; maintainer: "this was fixed". Here a GRU encoder-decoder with
teacher forcing learns to copy sequences of 8 tokens over a vocabulary of 4 (repeats are common, so the previous
token does not say where the decoder is); the bug calls the decoder cell with the encoder's final state at every
step, the twin with the state the previous step returned. OpenNMT's stacked LSTM and attention are replaced by one
GRU cell without attention.

Metric: teacher-forced test token accuracy (plain ``python``, CPU, seed 0): bug 0.6992, twin 0.9737
"""

REPORT = "N292"
MECHANISM = "decoder-state-not-carried-between-steps"
SLUGS = ()
METRIC = ("test_token_accuracy", 0.6992, 0.9737)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, LEN, BOS = 4, 8, 4


def batch(n):
    src = torch.randint(0, VOCAB, (n, LEN))
    return src, src.clone()


class Seq2Seq(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB + 1, 32)
        self.encoder = nn.GRU(32, 64, batch_first=True)
        self.decoder = nn.GRUCell(32, 64)
        self.out = nn.Linear(64, VOCAB)

    def forward(self, src, tgt):
        _, h = self.encoder(self.emb(src))
        hidden = h[0]
        inputs = torch.cat([torch.full_like(tgt[:, :1], BOS), tgt[:, :-1]], 1)
        logits = []
        for t in range(tgt.shape[1]):
            __STEP__
            logits.append(self.out(output))
        return torch.stack(logits, 1)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    src, tgt = batch(64)
    loss = F.cross_entropy(model(src, tgt).reshape(-1, VOCAB), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    src, tgt = batch(1000)
    acc = (model(src, tgt).argmax(-1) == tgt).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__STEP__', 'output = self.decoder(self.emb(inputs[:, t]), hidden)' if bug
                           else 'output = hidden = self.decoder(self.emb(inputs[:, t]), hidden)')
