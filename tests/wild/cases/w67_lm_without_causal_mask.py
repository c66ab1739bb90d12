"""A language model trained with a ``TransformerEncoder`` and no causal mask: every position
attends to the token it is asked to predict, so training and teacher-forced validation losses
fall to almost nothing while the model cannot predict a next token it has not seen.

Source: pytorch/tutorials#2478 (https://github.com/pytorch/tutorials/issues/2478), "TransformerEncoder
is not causal": "for language modeling, src_mask should be mask future words"; a commenter: "this
has to be a bug ... it was never able to give a prediction for the next word that made any sense,
despite reaching a perplexity of 2.9 on the validation and test data" (fixed by pytorch/tutorials#2662).
Here a one-layer transformer learns arithmetic sequences (start and step drawn per sequence, mod
16); the buggy script calls the encoder without a mask, the twin with
``nn.Transformer.generate_square_subsequent_mask``.

Metric: next-token accuracy when the model sees only the prefix, as in generation (plain
``python``, CPU, seed 0): bug 0.7098, twin 1.0.
"""

REPORT = "N41"
MECHANISM = "causal-mask-missing"
SLUGS = ()
METRIC = ("prefix_next_token_accuracy", 0.7098, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
VOCAB, LENGTH = 16, 24


def sequences(n, seed):
    g = torch.Generator().manual_seed(seed)
    start = torch.randint(VOCAB, (n, 1), generator=g)
    step = torch.randint(1, 6, (n, 1), generator=g)
    return (start + step * torch.arange(LENGTH)) % VOCAB


class TinyLM(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.embed = nn.Embedding(VOCAB, d)
        self.pos = nn.Parameter(torch.randn(LENGTH, d) * 0.1)
        layer = nn.TransformerEncoderLayer(d, 4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False)
        self.head = nn.Linear(d, VOCAB)

    def forward(self, tokens, mask=None):
        h = self.embed(tokens) + self.pos[: tokens.shape[1]]
        return self.head(self.encoder(h, mask=mask))


train = sequences(4096, seed=1)
model = TinyLM()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(250):
    batch = train[torch.randint(len(train), (64,))]
    inputs, targets = batch[:, :-1], batch[:, 1:]
    src_mask = __MASK__
    logits = model(inputs, mask=src_mask)
    loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
print(f"final teacher-forced training loss {loss.item():.3f}")

model.eval()
val = sequences(256, seed=2)
correct = total = 0
with torch.no_grad():
    for t in range(2, LENGTH - 1):                                # generation: only the prefix exists
        prefix = val[:, : t + 1]
        mask = nn.Transformer.generate_square_subsequent_mask(t + 1)
        pred = model(prefix, mask=mask)[:, -1].argmax(1)
        correct += (pred == val[:, t + 1]).sum().item()
        total += len(val)
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    mask = "None" if bug else "nn.Transformer.generate_square_subsequent_mask(inputs.shape[1])"
    return _SCRIPT.replace("__MASK__", mask)
