"""A dropout module that sets its own rate to zero in evaluation mode: the first validation pass switches dropout off
for the rest of training, even after ``model.train()``, and a network that relied on dropout against noisy labels
overfits from then on -- with no error.

Source: NVIDIA/Megatron-LM#411 (https://github.com/NVIDIA/Megatron-LM/pull/411), "bug fix: when eval, dropout_p turns
to 0 forever": "It's a bug in ``FlashSelfAttention`` class. Once you run ``forward`` in eval mode, ``dropout_p`` will
become 0 forever, even you turn back to training mode" (merged). Here a wide MLP with two dropout layers (rate 0.6)
written like ``FlashSelfAttention``'s (the rate is an attribute the forward reads) is trained on 150 digits, 30% of
them with random labels, and validated after every epoch; the buggy forward assigns ``self.dropout_p = 0.0`` when
not training, the twin passes 0 only for that call. Megatron's attention dropout is replaced by dropout on hidden
units.

Metric: validation accuracy after 40 epochs (plain ``python``, CPU, seed 0): bug 0.6901, twin 0.7403
"""

REPORT = "N278"
MECHANISM = "eval-pass-zeroes-dropout-rate"
SLUGS = ()
METRIC = ("val_accuracy", 0.6901, 0.7403)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
perm = torch.randperm(len(X))
tr, va = perm[:150], perm[1000:]
Y_noisy = Y.clone()
flip = tr[torch.rand(len(tr)) < 0.3]
Y_noisy[flip] = torch.randint(0, 10, (len(flip),))


class SelfAttentionDropout(nn.Module):
    def __init__(self, dropout_p):
        super().__init__()
        self.dropout_p = dropout_p

    def forward(self, x):
        __FORWARD__


model = nn.Sequential(nn.Linear(64, 512), nn.ReLU(), SelfAttentionDropout(0.6), nn.Linear(512, 512), nn.ReLU(),
                      SelfAttentionDropout(0.6), nn.Linear(512, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    model.train()
    for _ in range(10):
        i = tr[torch.randint(0, len(tr), (64,))]
        loss = F.cross_entropy(model(X[i]), Y_noisy[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        acc = (model(X[va]).argmax(1) == Y[va]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


_BUG = ("if not self.training:\n            self.dropout_p = 0.0\n"
        "        return F.dropout(x, self.dropout_p, training=True)")
_TWIN = "return F.dropout(x, self.dropout_p if self.training else 0.0, training=True)"


def script(bug: bool) -> str:
    return _SCRIPT.replace('__FORWARD__', _BUG if bug else _TWIN)
