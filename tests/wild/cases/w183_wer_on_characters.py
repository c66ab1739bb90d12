"""A "word error rate" that is computed on characters and averaged per utterance: a recogniser that
gets one character in fourteen wrong spoils about a third of the words, but the reported number
counts the character edits and reads as a five-times better system -- with no error.

Source: openvinotoolkit/open_model_zoo#1430 (https://github.com/openvinotoolkit/open_model_zoo/pull/1430),
"Fix WER metric, rename greedy_wer to wer, add CER metric for speech recognition": "The existing
implementation of "wer" metric computed CER metric instead, and incorrectly averaged it over samples.
The existing greedy_wer metric was the correct WER metric, consistent with the other implementations
(for example, Mozilla DeepSpeech)" (merged).  Here a frame-level classifier recognises synthetic
utterances (one noisy acoustic frame per character, words from a small vocabulary) and the validation
transcripts are scored.  The buggy ``word_error_rate`` averages each utterance's character edit
distance over its length, the twin divides the word edit distance summed over the corpus by the number
of reference words.

Metric: the reported word error rate on 200 held-out utterances (plain ``python``, CPU, seed 0; lower
reads better): bug 0.0698, twin 0.3868 (the bug reads better: the twin is the real WER)
"""

REPORT = "N157"
MECHANISM = "wer-computed-on-characters"
SLUGS = ()
METRIC = ("reported_wer", 0.0698, 0.3868)

_SCRIPT = '''
import random

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rnd = random.Random(0)
ALPHABET = " abcdefghijklmnopqrstuvwxyz"
WORDS = ["model", "train", "speech", "audio", "signal", "frame", "token", "noise", "batch", "error",
         "learn", "voice", "sound", "words", "clear"]


def utterance():
    return " ".join(rnd.choice(WORDS) for _ in range(rnd.randint(3, 6)))


def features(text):  # one acoustic frame per character: a noisy code of the character
    codes = torch.tensor([ALPHABET.index(c) for c in text])
    return F.one_hot(codes, len(ALPHABET)).float() * 2 + 0.55 * torch.randn(len(text), len(ALPHABET)), codes


def edit_distance(ref, hyp):
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
    return row[-1]


def word_error_rate(refs, hyps):
    __WER__


train = [features(utterance()) for _ in range(400)]
model = nn.Sequential(nn.Linear(len(ALPHABET), 64), nn.ReLU(), nn.Linear(64, len(ALPHABET)))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(3):
    for x, y in train:
        loss = F.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

refs, hyps = [], []
with torch.no_grad():
    for _ in range(200):
        text = utterance()
        x, _ = features(text)
        refs.append(text)
        hyps.append("".join(ALPHABET[i] for i in model(x).argmax(1).tolist()))
print(f"METRIC {word_error_rate(refs, hyps):.4f}")
'''


_BUG = "return sum(edit_distance(r, h) / len(r) for r, h in zip(refs, hyps)) / len(refs)"
_TWIN = ("return sum(edit_distance(r.split(), h.split()) for r, h in zip(refs, hyps)) "
         "/ sum(len(r.split()) for r in refs)")


def script(bug: bool) -> str:
    return _SCRIPT.replace("__WER__", _BUG if bug else _TWIN)
