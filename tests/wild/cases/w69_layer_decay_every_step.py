"""Layer-wise learning-rate decay applied inside ``step()`` instead of once when the optimizer is
built: every step multiplies each layer's learning rate by its decay factor again, so the learning
rates of all but the top layer shrink geometrically to zero within a few dozen steps.

Source: jaehyunnn/ViTPose_pytorch#20 (https://github.com/jaehyunnn/ViTPose_pytorch/issues/20), "The
learning rate warms up to the preset value during training and quickly becomes 0"; the maintainer:
"`LayerDecayOptimizer` was incorrectly applying layer decay **every step** instead of **once at
initialization**, causing LR to exponentially decay to zero."  Here a four-layer MLP on noisy digits
gets one parameter group per layer (decay 0.65 per layer below the head); the buggy wrapper scales
the groups' learning rates at every step, the twin once in ``__init__``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.5491, twin 0.7884.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N43"
MECHANISM = "lr-decays-to-zero"
SLUGS = ()
METRIC = ("val_accuracy", 0.5491, 0.7884)

_SCRIPT = PRELUDE + '''
class LayerDecayOptimizer:
    """Wraps an optimizer whose parameter groups carry a ``lr_scale``."""

    def __init__(self, optimizer):
        self.optimizer = optimizer
        self.param_groups = optimizer.param_groups
        __INIT__

    def scale_lrs(self):
        for group in self.param_groups:
            group["lr"] *= group["lr_scale"]

    def zero_grad(self):
        self.optimizer.zero_grad()

    def step(self):
        __STEP__
        self.optimizer.step()


g = torch.Generator().manual_seed(1)
noisy = X + 0.3 * torch.randn(X.shape, generator=g)
layers = [nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 64), nn.Linear(64, 10)]
model = nn.Sequential(layers[0], nn.Tanh(), layers[1], nn.Tanh(), layers[2], nn.Tanh(), layers[3])
decay = 0.65
groups = [{"params": layer.parameters(), "lr_scale": decay ** (len(layers) - 1 - i)} for i, layer in enumerate(layers)]
opt = torch.optim.SGD(groups, lr=0.1, momentum=0.9)
#@guard
optimizer = LayerDecayOptimizer(opt)
loader = DataLoader(TensorDataset(noisy[:1400], Y[:1400]), batch_size=64, shuffle=True)
for epoch in range(4):
    for xb, yb in loader:
        optimizer.zero_grad()
        loss = F.cross_entropy(model(xb), yb)
        loss.backward()
        optimizer.step()
    lrs = ", ".join(f"{grp['lr']:.2g}" for grp in optimizer.param_groups)
    print(f"epoch {epoch}: lr per layer {lrs}")
model.eval()
with torch.no_grad():
    acc = (model(noisy[1400:]).argmax(1) == Y[1400:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    if bug:
        return _SCRIPT.replace("__INIT__", "pass").replace("__STEP__", "self.scale_lrs()                  # every step")
    return _SCRIPT.replace("__INIT__", "self.scale_lrs()                  # once").replace("__STEP__", "pass")
