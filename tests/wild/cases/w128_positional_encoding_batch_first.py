"""A sequence-first positional encoding (the PyTorch tutorial's ``pe[:x.size(0)]``) applied to
batch-first input: it indexes the encoding by the batch position instead of the time step, so
every token of a sequence gets the same vector, the encoder sees no order at all, and any label
that depends on order is out of reach -- with no error.

Source: songyangco/GETNext#2 (https://github.com/songyangco/GETNext/issues/2), "Question about
positional encoding": "I found that positional encoding is added to the batch dimension, which
means that the same positional encoding is used for all time steps when encoding a trajectory of
length k"; a second user: "I have the same confusion".  Here sequences of 8 tokens (vocabulary 10)
are labelled by whether the first token is larger than the last; a one-layer ``batch_first``
Transformer encoder with mean pooling reads them.  The buggy encoding adds ``pe[:x.size(0)]`` (a
``(max_len, 1, d)`` table, broadcast over the batch-first input); the twin adds
``pe[:x.size(1)].transpose(0, 1)``, the encoding of each time step.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.5317, twin 0.96.
"""

REPORT = "N102"
MECHANISM = "positional-encoding-on-batch-axis"
SLUGS = ()
METRIC = ("val_accuracy", 0.5317, 0.96)

_SCRIPT = '''
import math
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
N, T, V = 3000, 8, 10
seq = torch.randint(V, (N, T), generator=torch.Generator().manual_seed(1))
y = (seq[:, 0] > seq[:, -1]).long()
train_ds, val_ds = TensorDataset(seq[:2400], y[:2400]), TensorDataset(seq[2400:], y[2400:])


class PositionalEncoding(nn.Module):
    def __init__(self, d_model, max_len=5000):
        super().__init__()
        position = torch.arange(max_len).unsqueeze(1)
        div_term = torch.exp(torch.arange(0, d_model, 2) * (-math.log(10000.0) / d_model))
        pe = torch.zeros(max_len, 1, d_model)
        pe[:, 0, 0::2] = torch.sin(position * div_term)
        pe[:, 0, 1::2] = torch.cos(position * div_term)
        self.register_buffer("pe", pe)

    def forward(self, x):  # x: (batch, seq, d_model)
        return x + __PE__


class Net(nn.Module):
    def __init__(self, d=32):
        super().__init__()
        self.emb = nn.Embedding(V, d)
        self.pos = PositionalEncoding(d)
        layer = nn.TransformerEncoderLayer(d, nhead=4, dim_feedforward=64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=1, enable_nested_tensor=False)
        self.head = nn.Linear(d, 2)

    def forward(self, s):
        return self.head(self.encoder(self.pos(self.emb(s))).mean(1))


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
loader = DataLoader(train_ds, batch_size=64, shuffle=True)
for epoch in range(8):
    model.train()
    for sb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(sb), yb).backward()
        opt.step()

model.eval()
correct = 0
with torch.no_grad():
    for sb, yb in DataLoader(val_ds, batch_size=64):
        correct += (model(sb).argmax(1) == yb).sum().item()
print(f"METRIC {correct / len(val_ds):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PE__", "self.pe[:x.size(0)]" if bug else "self.pe[:x.size(1)].transpose(0, 1)")
