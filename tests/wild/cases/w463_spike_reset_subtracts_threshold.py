"""A leaky integrate-and-fire neuron whose reset term is ``spk - threshold`` instead of ``spk * threshold``: when
the neuron does not spike, the "reset" is ``-threshold`` and is subtracted, so every silent step adds the threshold
to the membrane and the neurons are driven to fire regardless of their input -- training runs and accuracy drops.

Source: jeshraghian/snntorch#413 (https://github.com/jeshraghian/snntorch/pull/413), "Fix reset calculation in
forward function": "I found an issue in tutorial 6 ... ``reset = (spk - self.threshold).detach()`` ... The reset
computation is incorrect, and it should be ``reset = (spk * self.threshold).detach()``" (merged; a maintainer
"applied the change to the Chinese version as well"). Here a two-layer spiking network of the tutorial's
``LeakySurrogate`` neurons (a fast-sigmoid surrogate gradient, 15 time steps, spike counts as logits) classifies the
digits; the reset is ``(spk - self.threshold).detach()`` (the bug) or ``(spk * self.threshold).detach()`` (the
twin). The reproduction departs from the report in the data (digits fed as constant currents instead of MNIST
spike trains) and the readout (spike counts with cross-entropy instead of the tutorial's rate-coded loss).

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.8992, twin 0.9219 (a small gap; at seed 1 0.5894 /
0.9345)
"""

REPORT = "N437"
MECHANISM = "neuron-reset-from-spike-minus-threshold"
SLUGS = ()
METRIC = ("test_accuracy", 0.8992, 0.9219)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
_digits = load_digits()
X = torch.tensor(_digits.data, dtype=torch.float32) / 16.0
Y = torch.tensor(_digits.target)
NUM_STEPS = 15


class FastSigmoidSpike(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return (x > 0).float()

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad / (1 + 10 * x.abs()) ** 2


class LeakySurrogate(nn.Module):
    """A leaky integrate-and-fire neuron with reset by subtraction."""

    def __init__(self, beta=0.9, threshold=1.0):
        super().__init__()
        self.beta = beta
        self.threshold = threshold

    def forward(self, input_, mem):
        spk = FastSigmoidSpike.apply(mem - self.threshold)
        reset = __RESET__
        mem = self.beta * mem + input_ - reset
        return spk, mem


class SNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(64, 128)
        self.lif1 = LeakySurrogate()
        self.fc2 = nn.Linear(128, 10)
        self.lif2 = LeakySurrogate()

    def forward(self, x):
        mem1 = torch.zeros(x.shape[0], 128)
        mem2 = torch.zeros(x.shape[0], 10)
        counts = 0
        for _ in range(NUM_STEPS):
            spk1, mem1 = self.lif1(self.fc1(x), mem1)
            spk2, mem2 = self.lif2(self.fc2(spk1), mem2)
            counts = counts + spk2
        return counts


model = SNN()
opt = torch.optim.Adam(model.parameters(), lr=2e-3)
#@guard
for epoch in range(15):
    perm = torch.randperm(1400)
    for k in range(0, 1400, 64):
        idx = perm[k:k + 64]
        loss = F.cross_entropy(model(X[idx]), Y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    acc = (model(X[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESET__", "(spk - self.threshold).detach()" if bug else "(spk * self.threshold).detach()")
