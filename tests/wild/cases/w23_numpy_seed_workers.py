"""Random augmentation drawn from a NumPy generator in a multi-worker DataLoader: every worker
replays the same random stream, so "random" augmentations repeat across workers.

Source: Stack Overflow 67180955 and "Using PyTorch + NumPy? You're making a mistake"
(https://tanelp.github.io/posts/a-bug-that-plagues-thousands-of-open-source-ml-projects/),
TrainCheck's ``stackoverflow-67180955``.  PyTorch 1.9 re-seeds the global NumPy generator per
worker (pytorch/pytorch#56488), so this reproduction keeps the still-live variant: a
``np.random.RandomState`` created in the dataset's ``__init__`` is copied into each forked worker.
The twin re-seeds it per worker in a ``worker_init_fn`` (the fix the post recommends).
"""

from tests.wild.cases.common import PRELUDE

SLUGS = ("worker-rng-copied",)

_SCRIPT = PRELUDE + '''
import numpy as np


class Noisy(torch.utils.data.Dataset):
    def __init__(self, base):
        self.base = base
        self.rng = np.random.RandomState(0)

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        x, y = self.base[i]
        return x + torch.tensor(self.rng.normal(0, 0.05, x.shape), dtype=torch.float32), y


def reseed(worker_id):
    info = torch.utils.data.get_worker_info()
    info.dataset.rng = np.random.RandomState(info.seed % 2**32)


model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(Noisy(train_ds), batch_size=64, shuffle=True, num_workers=2{init})
#@guard
for epoch in range(2):
    for xb, yb in train_loader:
        opt.zero_grad()
        loss_fn(model(xb), yb).backward()
        opt.step()
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(init="" if bug else ", worker_init_fn=reseed")
