"""An initialisation loop over ``self.children()``, the module's immediate blocks, none of them a layer of the type it
tests for, so the layers nested in the blocks keep PyTorch's default initialisation: a deep ReLU network whose
layers were meant to be initialised for depth trains from a signal that vanishes through its ten layers -- nothing
fails.

Source: pytorch/vision#2326 (https://github.com/pytorch/vision/issues/2326): ``FeaturePyramidNetwork`` initialises
with ``for m in self.children(): if isinstance(m, nn.Conv2d): nn.init.kaiming_uniform_(m.weight, a=1)``, but its
children are the ``ModuleList``s of blocks, so the nested convolutions keep the default initialisation; maintainer:
"That is a very good catch!" (labels: bug; fixed by #2954, merged, iterating ``self.modules()``). Here a ten-layer
ReLU MLP (width 64, its blocks in a ``ModuleList`` of ``Sequential``s) classifies digits, trained 400 steps by SGD
with momentum; its constructor runs the same loop (``kaiming_uniform_(a=1)``, bias 0) over ``self.children()`` in the
bug and ``self.modules()`` in the twin. The reproduction replaces the FPN's convolutions by linear layers and a
detector by a digits classifier; the network is deeper than an FPN so that the initialisation decides the outcome.

Metric: test accuracy on 497 held-out digits (plain ``python``, CPU, seed 0): bug 0.1026, twin 0.9316
"""

REPORT = "N387"
MECHANISM = "init-loop-over-children-not-modules"
SLUGS = ()
METRIC = ('test_accuracy', 0.1026, 0.9316)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]


class DeepNet(nn.Module):
    def __init__(self, depth=10, width=64):
        super().__init__()
        self.inner_blocks = nn.ModuleList([nn.Sequential(nn.Linear(64 if i == 0 else width, width), nn.ReLU())
                                           for i in range(depth)])
        self.head = nn.Sequential(nn.Linear(width, 10))
__LOOP__            if isinstance(m, nn.Linear):
                nn.init.kaiming_uniform_(m.weight, a=1)
                nn.init.constant_(m.bias, 0)

    def forward(self, x):
        for block in self.inner_blocks:
            x = block(x)
        return self.head(x)


model = DeepNet()
opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
#@guard
for step in range(400):
    idx = tr[torch.randint(0, len(tr), (64,))]
    loss = F.cross_entropy(model(X[idx]), y[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    loop = ('        for m in self.children():\n' if bug
            else '        for m in self.modules():\n')
    return _SCRIPT.replace('__LOOP__', loop)
