"""A sequence-to-sequence model evaluated with teacher forcing: during validation the decoder is
fed the reference tokens instead of its own predictions (half of the time, as in training), so
errors never compound and the reported score is far above what the model does on its own -- with
no error.

Source: keon/seq2seq#8 (https://github.com/keon/seq2seq/issues/8), "Model still uses teacher
forcing when evaluating": "when the trained model is evaluated using the evaluate function, the
'model' still uses teacher forcing to evaluate the trained model. Therefore, there might be 50%
probability to use true labels as an input for the hidden state at the next timestamp"; reply:
"yes you're right, there needs to be an `is_eval` flag that tells the `seq2seq` model not to use
teacher forcing when evaluating."  Here a GRU encoder-decoder learns to continue a chain of 6
digits that starts at the first source token, each output following from the previous one by a fixed
rule except for a random jump 30% of the time (training with teacher forcing ratio 0.5, as the
repository does); the buggy validation calls the model with the training default, the twin with
``teacher_forcing_ratio=0.0`` (greedy decoding).

Metric: reported validation token accuracy (plain ``python``, CPU, seed 0):
bug 0.719, twin 0.545 (the bug reads better: the twin is the model's real accuracy).
"""

REPORT = "N103"
MECHANISM = "teacher-forcing-in-evaluation"
SLUGS = ()
METRIC = ("reported_val_token_accuracy", 0.719, 0.545)

_SCRIPT = '''
import random
import torch
from torch import nn
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

torch.manual_seed(0)
random.seed(0)
N, T, V = 3000, 6, 10
SOS = V
g = torch.Generator().manual_seed(1)
src = torch.randint(V, (N, T), generator=g)
step = torch.randperm(V, generator=g)  # each output token follows from the previous one...
trg = torch.empty_like(src)
trg[:, 0] = src[:, 0]
for i in range(1, T):
    jump = torch.rand(N, generator=g) < 0.3  # ...except for a random jump 30% of the time
    trg[:, i] = torch.where(jump, torch.randint(V, (N,), generator=g), step[trg[:, i - 1]])
train_ds, val_ds = TensorDataset(src[:2500], trg[:2500]), TensorDataset(src[2500:], trg[2500:])


class Seq2Seq(nn.Module):
    def __init__(self, h=128):
        super().__init__()
        self.src_emb = nn.Embedding(V, 32)
        self.trg_emb = nn.Embedding(V + 1, 32)
        self.encoder = nn.GRU(32, h, batch_first=True)
        self.decoder = nn.GRU(32, h, batch_first=True)
        self.out = nn.Linear(h, V)

    def forward(self, s, t, teacher_forcing_ratio=0.5):
        _, hidden = self.encoder(self.src_emb(s))
        token = torch.full((s.size(0),), SOS, dtype=torch.long)
        logits = []
        for i in range(t.size(1)):
            o, hidden = self.decoder(self.trg_emb(token).unsqueeze(1), hidden)
            step = self.out(o.squeeze(1))
            logits.append(step)
            token = t[:, i] if random.random() < teacher_forcing_ratio else step.argmax(1)
        return torch.stack(logits, 1)


model = Seq2Seq()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(5):
    model.train()
    for sb, tb in DataLoader(train_ds, batch_size=64, shuffle=True):
        opt.zero_grad()
        F.cross_entropy(model(sb, tb).reshape(-1, V), tb.reshape(-1)).backward()
        opt.step()


def evaluate(model, data):
    model.eval()
    right = 0
    with torch.no_grad():
        for sb, tb in DataLoader(data, batch_size=100):
            out = model(sb, tb__TF__)
            right += (out.argmax(2) == tb).sum().item()
    return right / (len(data) * T)


print(f"METRIC {evaluate(model, val_ds):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__TF__", "" if bug else ", teacher_forcing_ratio=0.0")
