"""A bidirectional LSTM classifier reading ``out[:, -1, :]``: at the last time step the forward
half has read the whole sequence but the backward half has read only the last token, so half of
the features carry almost nothing and information near the start of the sequence must survive
the forward pass alone -- with no error.

Source: yunjey/pytorch-tutorial#149 (https://github.com/yunjey/pytorch-tutorial/issues/149), "output
of bidirectional LSTM": "From this code snippet, you took the **LAST** hidden state of forward and
backward LSTM ... Please note that if we pick the output at the last time step, the reverse RNN will
have only seen the last input (x_3 in the picture). It'll hardly provide any predictive power ... I
think a more information-rich way of using the output of bidirectional LSTM is to concatenate the
*last* hidden state of *forward* LSTM and *first* hidden state of *reverse* LSTM" (the fix, #174:
"concatenate the last hidden state of forward LSTM and first hidden state of reverse LSTM").  Here
sequences of 30 random tokens are classified by their first token, with the tutorial's model
(``nn.LSTM(..., bidirectional=True, batch_first=True)`` and a linear layer on ``2 * hidden``
features).  The buggy model feeds ``out[:, -1, :]``; the twin the forward half of the last step and
the backward half of the first step.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.0883, twin 1.0.
"""

REPORT = "N117"
MECHANISM = "bidirectional-output-last-step"
SLUGS = ()
METRIC = ("val_accuracy", 0.0883, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
N, T, V, HID = 3000, 30, 10, 32
seq = torch.randint(V, (N, T), generator=g)
label = seq[:, 0]  # the class is the first token


class BiRNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, 16)
        self.lstm = nn.LSTM(16, HID, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(2 * HID, V)

    def forward(self, s):
        out, _ = self.lstm(self.emb(s))  # (batch, seq, 2 * hidden): forward half, then backward half
        return self.fc(__FEATURES__)


model = BiRNN()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(4):
    for batch in torch.randperm(2400).split(64):
        opt.zero_grad()
        F.cross_entropy(model(seq[batch]), label[batch]).backward()
        opt.step()

with torch.no_grad():
    acc = (model(seq[2400:]).argmax(1) == label[2400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FEATURES__", "out[:, -1, :]" if bug else
                           "torch.cat([out[:, -1, :HID], out[:, 0, HID:]], dim=1)")
