"""Output lengths of a subsampling front end divided by its stride a second time: the convolution already
returns the lengths of its output, and the module shifts them right by two again (and subtracts one), so the
CTC loss and the decoder read only the first quarter of every utterance's frames -- with no error as long as
that quarter is still longer than the transcript.

Source: openspeech-team/openspeech#76 (https://github.com/openspeech-team/openspeech/issues/76), "is
openspeech.modules.conv2d_subsampling forward method made a mistake while calculating the output_lengths?"
(labels: BUG): "`outputs, input_lengths = super().forward(inputs, input_lengths)` / `output_lengths =
input_lengths >> 2` / `output_lengths -= 1` ... In line 2, input_lengths has already been updated to the
proper output_lengths ... later in line <3, 4>, output_lenghts is assigned to input_lenghts divided by 4 which I
believe leads to an error"; maintainer: "Oh Thank you! I'll check. It seems to me that there is a problem
too".  Here synthetic utterances of 128 frames spell 3 to 5 symbols (each symbol a noisy 8-dimensional pattern
held for a stretch of frames), a convolutional encoder subsamples by 4 (two stride-2 convolutions) and a CTC
head is trained on its output; greedy CTC decoding uses the same lengths.  The buggy front end returns
``(lengths >> 2) - 1`` after the convolutions have already returned the subsampled lengths, the twin returns
them as they are.

Metric: test symbol error rate (edit distance over reference length; plain ``python``, CPU, seed 0): bug 0.7262,
twin 0.3729 (lower is better)
"""

REPORT = "N220"
MECHANISM = "subsampled-lengths-divided-twice"
SLUGS = ()
METRIC = ("test_symbol_error_rate", 0.7262, 0.3729)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
K, T, FEAT = 6, 128, 8  # symbols 1..5, blank 0
patterns = torch.randn(K, FEAT) * 2


def utterances(n):
    xs, ys = torch.zeros(n, T, FEAT), []
    for i in range(n):
        length = int(torch.randint(3, 6, ()))
        y = [int(torch.randint(1, K, ()))]
        while len(y) < length:
            s = int(torch.randint(1, K, ()))
            if s != y[-1]:
                y.append(s)
        bounds = torch.linspace(0, T, length + 1).long()
        for s, a, b in zip(y, bounds[:-1], bounds[1:]):
            xs[i, a:b] = patterns[s]
        ys.append(y)
    return xs + torch.randn_like(xs), ys


class Subsampling(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Sequential(nn.Conv1d(FEAT, 32, 5, 2, 2), nn.ReLU(), nn.Conv1d(32, 32, 5, 2, 2), nn.ReLU())

    def conv_forward(self, x, lengths):
        return self.conv(x.transpose(1, 2)).transpose(1, 2), (lengths - 1) // 4 + 1

    def forward(self, x, lengths):
        outputs, input_lengths = self.conv_forward(x, lengths)
        __LENGTHS__
        return outputs, output_lengths


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Subsampling()
        self.enc = nn.Sequential(nn.Conv1d(32, 32, 3, 1, 1), nn.ReLU())
        self.out = nn.Linear(32, K)

    def forward(self, x, lengths):
        h, out_lengths = self.sub(x, lengths)
        h = self.enc(h.transpose(1, 2)).transpose(1, 2)
        return self.out(h).log_softmax(-1), out_lengths


def edit(a, b):
    d = list(range(len(b) + 1))
    for i in range(1, len(a) + 1):
        prev, d[0] = d[0], i
        for j in range(1, len(b) + 1):
            prev, d[j] = d[j], min(d[j] + 1, d[j - 1] + 1, prev + (a[i - 1] != b[j - 1]))
    return d[len(b)]


xtr, ytr = utterances(600)
xte, yte = utterances(200)
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
lengths = torch.full((600,), T)
#@guard
for epoch in range(12):
    perm = torch.randperm(600)
    for s in range(0, 600, 50):
        b = perm[s:s + 50]
        logp, out_lengths = model(xtr[b], lengths[b])
        targets = torch.cat([torch.tensor(ytr[i]) for i in b])
        target_lengths = torch.tensor([len(ytr[i]) for i in b])
        loss = F.ctc_loss(logp.transpose(0, 1), targets, out_lengths, target_lengths, zero_infinity=True)
        opt.zero_grad()
        loss.backward()
        opt.step()

errors = 0
with torch.no_grad():
    logp, out_lengths = model(xte, torch.full((200,), T))
    best = logp.argmax(-1)
    for i in range(200):
        path = best[i, :out_lengths[i]].tolist()
        hyp = [p for k, p in enumerate(path) if p != 0 and (k == 0 or p != path[k - 1])]
        errors += edit(hyp, yte[i])
print(f"METRIC {errors / sum(len(y) for y in yte):.4f}")
'''


def script(bug: bool) -> str:
    line = ("output_lengths = (input_lengths >> 2) - 1" if bug else "output_lengths = input_lengths")
    return _SCRIPT.replace("__LENGTHS__", line)
