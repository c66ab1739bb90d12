"""A greedy CTC decoder built with its default blank index (0) for a model whose blank is elsewhere in the
label list: the decoder drops every real symbol at index 0 and emits the true blank as a character, so
validation transcripts are wrong and the reported accuracy differs from the tester's -- with no error.

Source: SeanNaren/deepspeech.pytorch#595 (https://github.com/SeanNaren/deepspeech.pytorch/issues/595),
"blank_index in Greedy Decoder not same in training and testing leads to different validation and test
accuracy": "While training, ```GreedyDecoder``` is called with default values, which gives blank_index
value of 0. But while testing, ```GreedyDecoder``` is called with ```blank_index=model.labels.index('_')```
... if you are training on a different natural language and hence creating your own labels.json file then
you need to put underscore in the beginning else you will observe different accuracy on the same
validation set."; maintainer: "I think this has been fixed in #601".  Here a frame classifier is trained
with ``nn.CTCLoss(blank=labels.index("_"))`` on synthetic utterances of 3-6 symbols from a label list that
puts the underscore last, and validated with a greedy decoder.  The buggy trainer builds
``GreedyDecoder(labels)`` (blank index 0), the twin ``GreedyDecoder(labels, blank_index=labels.index("_"))``.

Metric: share of validation utterances decoded exactly (plain ``python``, CPU, seed 0): bug 0.0, twin
0.57
"""

REPORT = "N174"
MECHANISM = "decoder-blank-index-differs-from-loss"
SLUGS = ()
METRIC = ("val_exact_match", 0.0, 0.57)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
labels = ["a", "b", "c", "d", "e", "f", "_"]
BLANK = labels.index("_")
C = len(labels)


def utterance():
    """Frames of noisy one-hot features: each symbol held 2-3 frames, a blank frame or two between."""
    n = int(torch.randint(3, 7, (1,), generator=g))
    symbols = torch.randint(0, BLANK, (n,), generator=g).tolist()
    frames = []
    for s in symbols:
        frames += [s] * int(torch.randint(2, 4, (1,), generator=g))
        frames += [BLANK] * int(torch.randint(1, 3, (1,), generator=g))
    x = F.one_hot(torch.tensor(frames), C).float() + 0.3 * torch.randn(len(frames), C, generator=g)
    return x, symbols


class GreedyDecoder:
    def __init__(self, labels, blank_index=0):
        self.labels = labels
        self.blank_index = blank_index

    def decode(self, log_probs):
        best = log_probs.argmax(-1).tolist()
        out, prev = [], None
        for k in best:
            if k != prev and k != self.blank_index:
                out.append(self.labels[k])
            prev = k
        return "".join(out)


train = [utterance() for _ in range(600)]
val = [utterance() for _ in range(200)]
model = nn.Sequential(nn.Linear(C, 32), nn.ReLU(), nn.Linear(32, C))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
ctc = nn.CTCLoss(blank=BLANK)
#@guard
for epoch in range(10):
    for i in range(0, 600, 20):
        batch = train[i:i + 20]
        xs = nn.utils.rnn.pad_sequence([x for x, _ in batch])
        log_probs = model(xs).log_softmax(-1)
        targets = torch.tensor([s for _, syms in batch for s in syms])
        loss = ctc(log_probs, targets, torch.tensor([len(x) for x, _ in batch]),
                   torch.tensor([len(syms) for _, syms in batch]))
        opt.zero_grad()
        loss.backward()
        opt.step()

decoder = __DECODER__
model.eval()
with torch.no_grad():
    hits = sum(decoder.decode(model(x)) == "".join(labels[s] for s in syms) for x, syms in val)
print(f"METRIC {hits / len(val):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__DECODER__", "GreedyDecoder(labels)" if bug
                           else 'GreedyDecoder(labels, blank_index=labels.index("_"))')
