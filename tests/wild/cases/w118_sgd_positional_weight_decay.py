"""An ``torch.optim.SGD`` subclass that forwards its weight decay positionally:
``super().__init__(params, lr, weight_decay)`` puts the weight decay in SGD's third parameter,
``momentum``, so training runs with momentum 5e-4 (none, in effect) and no weight decay.

Source: YudeWang/SEAM#21 (https://github.com/YudeWang/SEAM/issues/21), "The paramters in optimizer":
``class PolyOptimizer(torch.optim.SGD): def __init__(self, params, lr, weight_decay, max_step,
momentum=0.9): super().__init__(params, lr, weight_decay)`` -- "the order of paramters (params lr wd)
in PolyOptimizer is different from official SGD(params lr momentum). So I think the value of wd will
actually be assigned to momentum"; maintainer: "This part of code is borrowed from
https://github.com/jiwoon-ahn/psa, and it seems like a small bug which invalidates the momentum."
Here the same poly-decay optimizer trains an MLP on digits for 3 epochs at lr 0.01; the twin passes
``momentum=momentum, weight_decay=weight_decay`` by name.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.1889, twin 0.7406.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N92"
MECHANISM = "optimizer-argument-misplaced"
SLUGS = ()
METRIC = ("val_accuracy", 0.1889, 0.7406)

_SCRIPT = PRELUDE + '''

class PolyOptimizer(torch.optim.SGD):
    def __init__(self, params, lr, weight_decay, max_step, momentum=0.9):
        super().__init__(__ARGS__)
        self.global_step = 0
        self.max_step = max_step
        self.__initial_lr = [group["lr"] for group in self.param_groups]

    def step(self, closure=None):
        if self.global_step < self.max_step:
            lr_mult = (1 - self.global_step / self.max_step) ** 0.9
            for group, lr in zip(self.param_groups, self.__initial_lr):
                group["lr"] = lr * lr_mult
        super().step(closure)
        self.global_step += 1


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
loader = DataLoader(train_ds, batch_size=32, shuffle=True)
opt = PolyOptimizer(model.parameters(), lr=0.01, weight_decay=5e-4, max_step=3 * len(loader))
#@guard
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    args = "params, lr, weight_decay" if bug else "params, lr, momentum=momentum, weight_decay=weight_decay"
    return _SCRIPT.replace("__ARGS__", args)
