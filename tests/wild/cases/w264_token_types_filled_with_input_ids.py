"""A collate function that fills the token-type ids with the input ids: ``token_type_ids.append(
torch.LongTensor(seqs[0]))`` copies the sequence's words where the speaker ids (``seqs[1]``) belong, so the
model, which embeds token types with its word table as GPT-2 does, never learns who said what -- with no
error.

Source: devjwsong/gpt2-dialogue-generation-pytorch#11
(https://github.com/devjwsong/gpt2-dialogue-generation-pytorch/issues/11), "maybe wrong in PadCollate":
"`token_type_ids.append(torch.LongTensor(seqs[0]))` should change 0 to 1";
maintainer: "Hi, thank you for notifying me. I don't know why this stupid error is discovered now. Maybe I
did a mistake when conducting recent update. Thank you very much."  Here synthetic dialogues of six turns
(two speakers, four words each from a shared vocabulary) are labelled with the speaker who said a key word;
a model embeds words and token types with one table, applies a per-token MLP and max-pools.  The buggy
collate takes ``seqs[0]`` for the token types, the twin ``seqs[1]``.  The repository fine-tunes GPT-2 to
generate replies; the speaker information is tested here with a classification head.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.5220, twin 1.0000
"""

REPORT = "N238"
MECHANISM = "token-types-filled-with-input-ids"
SLUGS = ()
METRIC = ("test_accuracy", 0.5220, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, SP1, SP2, KEY = 40, 40, 41, 7          # word ids 0..39, then the two speaker tokens


def dialogue():
    """Two speakers take turns; the label says which speaker said the key word."""
    input_ids, speakers, said_by = [], [], None
    for turn in range(6):
        sp = SP1 if turn % 2 == 0 else SP2
        words = torch.randint(0, V, (4,)).tolist()
        words = [w if w != KEY else KEY + 1 for w in words]
        if said_by is None and torch.rand(()) < 0.3 or (said_by is None and turn == 5):
            words[torch.randint(0, 4, ()).item()] = KEY
            said_by = 0 if sp == SP1 else 1
        input_ids += words
        speakers += [sp] * 4
    return input_ids, speakers, said_by


class PadCollate:
    def pad_collate(self, batch):
        input_ids, token_type_ids, labels = [], [], []
        for seqs in batch:
            input_ids.append(torch.LongTensor(seqs[0]))
            token_type_ids.append(torch.LongTensor(seqs[__TT__]))
            labels.append(seqs[2])
        pad = nn.utils.rnn.pad_sequence
        return pad(input_ids, batch_first=True), pad(token_type_ids, batch_first=True), torch.tensor(labels)


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(V + 2, 32)        # token types are embedded with the word table, as in GPT-2
        self.mlp = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64))
        self.head = nn.Linear(64, 2)

    def forward(self, ids, types):
        h = self.mlp(self.wte(ids) + self.wte(types))
        return self.head(h.max(1).values)


train = [dialogue() for _ in range(3000)]
test = [dialogue() for _ in range(1000)]
collate = PadCollate()
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    ids, types, y = collate.pad_collate([train[k] for k in torch.randint(0, len(train), (64,)).tolist()])
    loss = F.cross_entropy(model(ids, types), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
ids, types, y = collate.pad_collate(test)
with torch.no_grad():
    acc = (model(ids, types).argmax(1) == y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__TT__', '0' if bug else '1')
    return s
