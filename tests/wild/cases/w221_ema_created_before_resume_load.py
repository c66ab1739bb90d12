"""An EMA of the weights registered before the checkpoint is loaded on resume: the shadow copies are taken
from the freshly initialised model, the checkpoint then overwrites the live weights only, and with a decay
near 1 the averaged model that is evaluated stays close to the random initialisation -- with no error.

Source: BangLiu/QANet-PyTorch#4 (https://github.com/BangLiu/QANet-PyTorch/issues/4), "Resume checkpoint": "when I
have trained the model for 10 epochs. And then I resume the 10th checkpoint and continue training the 11th
epoch. When training the 11th epoch, the loss is normal and low. But when the training of 11th epoch is end,
the test result of 11th is very low. Like the 1st epoch's result"; maintainer: "I also have this phenomenon";
diagnosis in the thread: "It is caused by EMA. The initialization of ema in QANet_main.py is before resuming
the model. The initialization should be moved after the model resuming operation".  Here an MLP is trained
on scikit-learn's digits for 10 epochs and checkpointed (to memory); the resumed run builds the model, the
EMA (decay 0.999, QANet's shadow-dictionary form) and loads the checkpoint, trains one more epoch updating the
EMA after each step, and evaluates the EMA weights.  The buggy run registers the EMA before
``load_state_dict``, the twin after it.

Metric: test accuracy of the EMA weights after the resumed epoch (plain ``python``, CPU, seed 0): bug 0.1033,
twin 0.8640
"""

REPORT = "N195"
MECHANISM = "ema-registered-before-checkpoint-load"
SLUGS = ()
METRIC = ("ema_test_accuracy", 0.1033, 0.8640)

_SCRIPT = '''
import copy
import io
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
Xtr, Ytr, Xte, Yte = X[:1400], Y[:1400], X[1400:], Y[1400:]


class EMA:
    def __init__(self, model, decay):
        self.decay = decay
        self.shadow = {n: p.detach().clone() for n, p in model.named_parameters()}

    def update(self, model):
        for n, p in model.named_parameters():
            self.shadow[n].mul_(self.decay).add_(p.detach(), alpha=1 - self.decay)


def net():
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def train_epoch(model, opt, ema=None):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 64):
        b = perm[i:i + 64]
        loss = F.cross_entropy(model(Xtr[b]), Ytr[b])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if ema is not None:
            ema.update(model)


first = net()
first_opt = torch.optim.SGD(first.parameters(), lr=0.1)
for epoch in range(10):
    train_epoch(first, first_opt)
buf = io.BytesIO()
torch.save({"model": first.state_dict(), "opt": first_opt.state_dict()}, buf)

# --- resume ---
buf.seek(0)
ckpt = torch.load(buf, weights_only=True)
model = net()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
__BEFORE__
model.load_state_dict(ckpt["model"])
opt.load_state_dict(ckpt["opt"])
__AFTER__
#@guard
train_epoch(model, opt, ema)

averaged = copy.deepcopy(model)
with torch.no_grad():
    for n, p in averaged.named_parameters():
        p.copy_(ema.shadow[n])
    acc = (averaged(Xte).argmax(1) == Yte).float().mean()
print(f"METRIC {acc.item():.4f}")
'''


def script(bug: bool) -> str:
    ema = "ema = EMA(model, decay=0.999)"
    return _SCRIPT.replace("__BEFORE__", ema if bug else "").replace("__AFTER__", "" if bug else ema)
