"""One ``torch.autocast`` context opened around the whole training loop: autocast caches the low-precision
copy of each weight the first time it is cast and keeps serving it until the context exits, so after every
``optimizer.step()`` the forward still runs on the bfloat16 copies of the initial weights -- the parameters
change, the model's outputs do not, and the loss stays flat, with no error.

Source: X-GenGroup/Flow-Factory#186 (https://github.com/X-GenGroup/Flow-Factory/pull/186), "[trainer,docs] fix:
per-forward autocast to avoid stale weight cache (zero KL / frozen fp32 training)" (merged): "`torch.autocast`'s
weight cache (keyed by tensor `data_ptr`) serves **stale** fp32->bf16 casts after any in-place weight change. A
single outer `with self.autocast()` around an `optimize()` loop masked both `optimizer.step()` updates and
ref/EMA parameter swaps ... For `master_weight_dtype: fp32` runs this froze training (flat loss)".  Here an
MLP is trained on scikit-learn's digits in bfloat16 autocast on the CPU (the cache works the same there).  The
buggy loop sits inside one ``with torch.autocast("cpu", dtype=torch.bfloat16):``; the twin opens the context
around each forward and loss.

Metric: test accuracy after 10 epochs (plain ``python``, CPU, seed 0): bug 0.1889, twin 0.8640
"""

REPORT = "N193"
MECHANISM = "autocast-weight-cache-spans-optimizer-steps"
SLUGS = ()
METRIC = ("test_accuracy", 0.1889, 0.8640)

_SCRIPT = '''
import contextlib
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1400], Y[:1400], X[1400:], Y[1400:]
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)


def autocast():
    return torch.autocast("cpu", dtype=torch.bfloat16)


outer = __OUTER__
inner = __INNER__
#@guard
with outer:
    for epoch in range(10):
        perm = torch.randperm(1400)
        for i in range(0, 1400, 64):
            b = perm[i:i + 64]
            with inner:
                loss = F.cross_entropy(model(Xtr[b]).float(), Ytr[b])
            opt.zero_grad()
            loss.backward()
            opt.step()

with torch.no_grad(), autocast():
    acc = (model(Xte).argmax(1) == Yte).float().mean()
print(f"METRIC {acc.item():.4f}")
'''


def script(bug: bool) -> str:
    outer, inner = ("autocast()", "contextlib.nullcontext()") if bug else ("contextlib.nullcontext()", "autocast()")
    return _SCRIPT.replace("__OUTER__", outer).replace("__INNER__", inner)
