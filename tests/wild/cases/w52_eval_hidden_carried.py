"""Evaluation that carries the recurrent hidden state from one batch into the next: each batch's
predictions start from the previous batch's final state instead of a fresh one.

Source: hungpthanh/GRU4REC-pytorch#7 (https://github.com/hungpthanh/GRU4REC-pytorch/issues/7):
"lib.evaluation.Evaluation does not reset hidden states"; the author agreed "hidden state should
be reseted before the input goes through the model".  Here each digit is a sequence of its 8 pixel
rows, training starts every batch from a zero state, and the evaluation loop passes the hidden
state on (400 validation digits in batches of 100); the twin resets it per batch.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7125, twin 0.8525.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N26"
MECHANISM = "batch-mixed"
SLUGS = ("eval-state-carried",)
METRIC = ("val_accuracy", 0.7125, 0.8525)

_SCRIPT = PRELUDE + '''
class GRU4Rec(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(8, 48, batch_first=True)
        self.head = nn.Linear(48, 10)

    def init_hidden(self, batch):
        return torch.zeros(1, batch, 48)

    def forward(self, x, hidden):
        out, hidden = self.gru(x.reshape(len(x), 8, 8), hidden)
        return self.head(out[:, -1]), hidden


model = GRU4Rec()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(X[1397:], Y[1397:]), batch_size=100)
for epoch in range(4):
    for xb, yb in train_loader:
        opt.zero_grad()
        logits, _ = model(xb, model.init_hidden(len(xb)))
        loss_fn(logits, yb).backward()
        opt.step()
model.eval()
correct = total = 0
with torch.no_grad():
    hidden = model.init_hidden(100)
    for xb, yb in val_loader:
        {reset}logits, hidden = model(xb, hidden)
        correct += (logits.argmax(1) == yb).sum().item()
        total += len(yb)
print(f"METRIC {{correct / total:.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(reset="" if bug else "hidden = model.init_hidden(len(xb))\n        ")
