"""A backbone that applies its ``frozen_stages`` only inside ``train()``: never calling
``model.train()`` leaves the "frozen" stage training.

Source: open-mmlab/mmpretrain#702 (https://github.com/open-mmlab/mmpretrain/issues/702), TrainCheck's
``mmpretrain-702``: most backbones call ``_freeze_stages()`` from ``train()`` only, so a loop that
never calls ``model.train()`` (a module starts in training mode already) fine-tunes the stages
the config froze.  Simulated here without mmcv: a backbone with the same ``train()`` override.
"""

from tests.wild.cases.common import PRELUDE

SLUGS = ("frozen-params-updated",)

_SCRIPT = PRELUDE + '''

class Backbone(nn.Module):
    def __init__(self, frozen_stages=1):
        super().__init__()
        self.frozen_stages = frozen_stages
        self.stage1 = nn.Linear(64, 64)
        self.stage2 = nn.Linear(64, 64)
        self.head = nn.Linear(64, 10)

    def _freeze_stages(self):
        if self.frozen_stages >= 1:
            self.stage1.eval()
            for p in self.stage1.parameters():
                p.requires_grad = False

    def train(self, mode=True):
        super().train(mode)
        self._freeze_stages()
        return self

    def forward(self, x):
        return self.head(F.relu(self.stage2(F.relu(self.stage1(x)))))


model = Backbone(frozen_stages=1)
{train}opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
#@guard
for epoch in range(2):
    for xb, yb in train_loader:
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(train="" if bug else "model.train()\n")
