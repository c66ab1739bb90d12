"""``nn.LSTM`` built without ``batch_first=True`` and fed ``(batch, time, features)`` tensors: it
reads the batch as the time axis and the time steps as the batch, so each sample's output is the
recurrence over the samples before it in the batch, and of its own sequence only one step counts.

Source: AndersonJo/dqn-pytorch#1 (https://github.com/AndersonJo/dqn-pytorch/issues/1), "Missing
batch_first attribute for LSTM model": "The semantics of LSTM input are `(seq_len, batch_size,
input_size)`. But the input format is `(batch_size, seq_len, input_size)` ... Astonishing part is
model is still learning with this error"; the maintainer agreed to fix it.  Here each digit is a
sequence of its 8 pixel rows and an LSTM classifies it from its last output; the twin passes
``batch_first=True``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.466, twin 0.8388.
"""

from tests.wild.cases.common import FIT, PRELUDE

REPORT = "N42"
MECHANISM = "batch-mixed"
SLUGS = ()
METRIC = ("val_accuracy", 0.466, 0.8388)

_SCRIPT = PRELUDE + FIT + '''
class RowLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 48__BATCH_FIRST__)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        out, _ = self.lstm(x.reshape(len(x), 8, 8))               # (batch, rows, pixels)
        return self.head(out[:, -1])


model = RowLSTM()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(train_ds, batch_size=64, shuffle=True), 4)
model.eval()
correct = 0
with torch.no_grad():
    for xb, yb in DataLoader(val_ds, batch_size=100):
        correct += (model(xb).argmax(1) == yb).sum().item()
print(f"METRIC {correct / len(val_ds):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__BATCH_FIRST__", "" if bug else ", batch_first=True")
