"""A sentence padded with the padding token's *id* and then mapped word by word through the vocabulary: an id is
not a word, so ``vocab.get(id, UNK)`` turns every padding position into the unknown token, which the model then
cannot tell from a real out-of-vocabulary word; the count of unknown words, here the signal, is drowned by the
padding of each sentence -- nothing fails.

Source: 649453932/Chinese-Text-Classification-Pytorch#24
(https://github.com/649453932/Chinese-Text-Classification-Pytorch/issues/24) (translated): "in `load_dataset` in
utils.py, line 56, `token.extend([vocab.get(PAD)] * (pad_size - len(token)))` pads the token list with PAD's id,
but the code below does word to id, `words_line.append(vocab.get(word, vocab.get(UNK)))`; since PAD's id is not in
the vocabulary, all the PADs become UNK's id ... line 56 should be `token.extend([PAD] * (pad_size - len(token)))`";
maintainer: "Many thanks! I will fix it tonight". Here synthetic sentences of 5 to 30 words are drawn from a
vocabulary of 50 frequent words, half of them (class 1) with two or three rare words that fall outside the
vocabulary; a FastText-style classifier (the repository's `FastText`: mean of the embeddings over the padded
sentence, ``padding_idx`` the PAD id) is trained on them; the bug pads with PAD's id before the lookup, the twin
pads with the PAD token. The reproduction replaces Chinese characters and news headlines by synthetic words and
puts all of the class signal in out-of-vocabulary words.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.5183, twin 1.0000
"""

REPORT = "N400"
MECHANISM = "padding-id-looked-up-as-word"
SLUGS = ()
METRIC = ("test_accuracy", 0.5183, 1.0)

_SCRIPT = '''import random

import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = random.Random(0)
UNK, PAD = "<UNK>", "<PAD>"
PAD_SIZE = 32


def sentence(label):
    words = [f"w{rng.randrange(50)}" for _ in range(rng.randint(5, 30))]
    if label:
        for _ in range(rng.randint(2, 3)):
            words[rng.randrange(len(words))] = f"r{rng.randrange(5000)}"   # rare words, outside the vocabulary
    return words


data = [(sentence(y), y) for y in [rng.randrange(2) for _ in range(3000)]]
vocab = {f"w{i}": i for i in range(50)}
vocab.update({UNK: len(vocab), PAD: len(vocab) + 1})


def load(words):
    token = list(words)[:PAD_SIZE]
    if len(token) < PAD_SIZE:
__PAD__
    return [vocab.get(word, vocab.get(UNK)) for word in token]


ids = torch.tensor([load(w) for w, _ in data])
labels = torch.tensor([y for _, y in data])


class FastText(nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = nn.Embedding(len(vocab), 32, padding_idx=vocab[PAD])
        self.fc1 = nn.Linear(32, 32)
        self.fc2 = nn.Linear(32, 2)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(self.embedding(x).mean(1))))


model = FastText()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(20):
    for i in torch.randperm(2400).split(64):
        loss = F.cross_entropy(model(ids[i]), labels[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    acc = (model(ids[2400:]).argmax(1) == labels[2400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "        token.extend([vocab.get(PAD)] * (PAD_SIZE - len(token)))"
_FIX = "        token.extend([PAD] * (PAD_SIZE - len(token)))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PAD__", _BUG if bug else _FIX)
