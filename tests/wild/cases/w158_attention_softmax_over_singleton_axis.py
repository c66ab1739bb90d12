"""Attention pooling whose scores, flattened to ``(batch * seq_len, 1)``, are softmaxed over the
size-1 axis: every weight is 1.0, the "attention" is a plain sum over the sequence, and a model that
must read one marked token among distractors cannot single it out -- with no error.

Source: DEEP-PolyU/KEQA_WSDM19#2 (https://github.com/DEEP-PolyU/KEQA_WSDM19/issues/2), "Attention
Weight Bug in Embedding": "``self.attn(torch.cat((x, outputs), 1)`` generate a tensor which size is
(seq_len*batch_size, 1), which results in all softmax results to be 1.0"; maintainer: "Yes. You are
right. It should be ... ``dim=0``".  Here a sequence of 12 tokens (a value 0-9 each) has one token
marked; the label is the marked token's value.  An embedding, a per-token score and a weighted sum
pool the sequence; the buggy pooling softmaxes the flattened scores over ``dim=1``, the twin
reshapes them to ``(batch, seq_len)`` and softmaxes over the sequence.

Metric: validation accuracy on 1000 new sequences (plain ``python``, CPU, seed 0): bug 0.253, twin 1.0
"""

REPORT = "N132"
MECHANISM = "softmax-over-singleton-axis"
SLUGS = ()
METRIC = ("val_accuracy", 0.253, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
B, T = 64, 12


def make(n):
    values = torch.randint(0, 10, (n, T), generator=g)
    marked = torch.randint(0, T, (n,), generator=g)
    marks = F.one_hot(marked, T)
    return values, marks, values[torch.arange(n), marked]


class Pooler(nn.Module):
    def __init__(self, h=32):
        super().__init__()
        self.value = nn.Embedding(10, h)
        self.mark = nn.Embedding(2, h)
        self.attn = nn.Linear(h, 1)
        self.out = nn.Linear(h, 10)

    def forward(self, values, marks):
        n, t = values.shape
        h = self.value(values) + self.mark(marks)  # (n, t, h)
        scores = self.attn(h.reshape(n * t, -1))  # (n * t, 1)
        weights = __WEIGHTS__
        return self.out((weights.unsqueeze(2) * h).sum(1))


x_train, m_train, y_train = make(4000)
x_val, m_val, y_val = make(1000)
model = Pooler()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(15):
    for i in range(0, 4000, B):
        loss = F.cross_entropy(model(x_train[i:i + B], m_train[i:i + B]), y_train[i:i + B])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (model(x_val, m_val).argmax(1) == y_val).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    weights = "F.softmax(scores, dim=1).view(n, t)" if bug else "F.softmax(scores.view(n, t), dim=1)"
    return _SCRIPT.replace("__WEIGHTS__", weights)
