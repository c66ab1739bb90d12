"""The pad token set to the end-of-sequence token, and padding masked out of the loss by token id:
every real EOS is masked with the padding, so the model is never trained to emit EOS and at
inference it does not stop.

Source: wenet-e2e/wesr#5 (https://github.com/wenet-e2e/wesr/pull/5, merged), "Fix the bug of using
the same token for padding and eos": "Models trained with the original code cannot stop the
generation in the decoding, leading to a high CER. The original code uses eos_token as the pad_token.
Then in the SpeechDataset iteration, tokens with the pad_token id are ignored in the loss calculation.
Thus the model didn't learn how to generate EOS in the training"; reply: "Good Catch! Thanks".
Also NVIDIA-NeMo/Automodel#1336 and mlabonne/llm-course#33.  Here a small GRU language model is
fine-tuned on sequences that count up from a random start to 20 and then end (``s, s+1, ..., 20,
EOS``), batched with right padding; labels equal to the pad id are set to -100.  The buggy
collator's pad id is the EOS id; the twin pads with a separate token.

Metric: share of validation sequences whose greedy continuation emits EOS right after 20 (plain ``python``,
CPU, seed 0): bug 0, twin 1.
"""

REPORT = "N72"
MECHANISM = "eos-masked-as-padding"
SLUGS = ()
METRIC = ("val_stops_at_end", 0.0, 1.0)

_SCRIPT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
LAST, EOS, PAD_TOKEN = 20, 21, 22
VOCAB = 23
PAD = __PAD__                                                       # tokenizer.pad_token_id
IGNORE = -100


def examples(n, seed):
    rng = random.Random(seed)
    return [list(range(s, LAST + 1)) + [EOS] for s in (rng.randrange(1, LAST - 2) for _ in range(n))]


def collate(batch):
    width = max(len(seq) for seq in batch)
    ids = torch.full((len(batch), width), PAD)
    for row, seq in enumerate(batch):
        ids[row, :len(seq)] = torch.tensor(seq)
    labels = ids[:, 1:].clone()
    labels[labels == PAD] = IGNORE                                  # padding carries no loss
    return ids[:, :-1], labels


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 64, batch_first=True)
        self.head = nn.Linear(64, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.embed(ids))[0])


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
data = examples(800, seed=1)
for epoch in range(3):
    random.Random(epoch).shuffle(data)
    for k in range(0, len(data), 32):
        inputs, labels = collate(data[k:k + 32])
        opt.zero_grad()
        F.cross_entropy(model(inputs).flatten(0, 1), labels.flatten(), ignore_index=IGNORE).backward()
        opt.step()

model.eval()
stops = 0
val = examples(200, seed=2)
with torch.no_grad():
    for seq in val:
        prompt = torch.tensor([seq[:-1]])                           # up to and including 20
        stops += int(model(prompt)[0, -1].argmax().item() == EOS)
print(f"METRIC {stops / len(val):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PAD__", "EOS" if bug else "PAD_TOKEN")
