"""An error rate computed as the mean of the utterances' own error rates instead of the total number of errors over
the total reference length: a two-token utterance weighs as much as a forty-token one, so when short utterances are
the hard ones the reported rate is far above the corpus rate -- with no error.

Source: sdrobert/pydrobert-pytorch#50 (https://github.com/sdrobert/pydrobert-pytorch/issues/50), filed and closed
by the maintainer: the error-rate function averaged per-utterance rates where the usual definition (as in
``sclite``) divides the summed edit distances by the summed reference lengths. Here a frame tagger (a small MLP)
labels utterances of 2-40 frames whose features are noisier in short utterances, and the test error rate is the
mean of the per-utterance rates (bug) or errors over frames (twin); with one label per frame the edit distance is
the number of mismatched frames. pydrobert's edit-distance kernels and speech features are replaced by the frame
tagger.

Metric: the reported test error rate (plain ``python``, CPU, seed 0): bug 0.1747, twin 0.1173 (the twin's is
the corpus error rate)
"""

REPORT = "N294"
MECHANISM = "error-rate-averaged-over-utterances"
SLUGS = ()
METRIC = ("test_error_rate", 0.1747, 0.1173)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
LABELS, DIM = 6, 8
centres = torch.randn(LABELS, DIM)


def utterance():
    n = int(torch.randint(2, 41, ()))
    y = torch.randint(0, LABELS, (n,))
    noise = 0.5 + 6.0 / n
    return centres[y] + noise * torch.randn(n, DIM), y


model = nn.Sequential(nn.Linear(DIM, 64), nn.ReLU(), nn.Linear(64, LABELS))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    xs, ys = zip(*[utterance() for _ in range(16)])
    loss = F.cross_entropy(model(torch.cat(xs)), torch.cat(ys))
    opt.zero_grad()
    loss.backward()
    opt.step()
errors, lengths = [], []
with torch.no_grad():
    for _ in range(500):
        x, y = utterance()
        errors.append(int((model(x).argmax(1) != y).sum()))
        lengths.append(len(y))
rate = __RATE__
print(f"METRIC {rate:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__RATE__', 'sum(e / n for e, n in zip(errors, lengths)) / len(errors)' if bug
                           else 'sum(errors) / sum(lengths)')
