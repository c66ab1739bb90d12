"""A batch-first tensor reshaped with ``view(T, B, F)`` for a sequence-first LSTM instead of
being transposed: the reshape interleaves the time steps of different samples, so each "sequence"
the LSTM sees is made of pieces of several samples, in training and in evaluation.

Source: HHTseng/video-classification#42 (https://github.com/HHTseng/video-classification/issues/42):
the decoder fed the LSTM with the batch and time dimensions swapped; a suggested ``.view(...)``
fix was answered with "This will not work ... Both yield the same shape but first one is
erroneous", ``transpose(0, 1)`` being the fix.  Here each digit is a sequence of its 8 pixel rows;
the twin transposes.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.0907, twin 0.8564.
"""

from tests.wild.cases.common import ACCURACY, FIT, PRELUDE

REPORT = "N10"
MECHANISM = "batch-mixed"
SLUGS = ()
METRIC = ("val_accuracy", 0.0907, 0.8564)

_SCRIPT = PRELUDE + ACCURACY + FIT + '''
class RowLSTM(nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = nn.LSTM(8, 48)  # sequence-first: (T, B, F)
        self.head = nn.Linear(48, 10)

    def forward(self, x):
        x = x.reshape(len(x), 8, 8)          # (B, T, F): one pixel row per time step
        seq = {reshape}
        out, _ = self.lstm(seq)
        return self.head(out[-1])


model = RowLSTM()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
for epoch in range(4):
    fit(model, opt, train_loader, 1, loss_fn)
    print(f"epoch {{epoch}}: val accuracy {{accuracy(model, val_loader):.3f}}")
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(reshape="x.view(8, len(x), 8)" if bug else "x.transpose(0, 1)")
