"""A train/validation split redrawn when training resumes: the split takes its permutation from an
unseeded generator, the resumed process draws a different one, and most of its "validation" frames
were training frames before the checkpoint, so the reported validation accuracy is inflated -- with
no error.

Source: talmolab/sleap-nn#600 (https://github.com/talmolab/sleap-nn/pull/600), "Fix: default seed to 42
and warn on seed mismatch during resume": "when resuming training ..., the train/val split is
regenerated (not restored from the checkpoint). On single-GPU with the old default of ``seed: null``,
each run produced a different random split -- images used for training could end up in validation on
resume, silently compromising evaluation metrics" (merged).  Here two processes train an MLP on 600
noisy digit scans: the first for 60 epochs, the second resumes its checkpoint (model and optimizer) for
60 more and reports its validation accuracy; each process starts its own randomness.  The buggy config
has ``SEED = None``, the twin ``SEED = 42``.

Metric: the resumed run's reported validation accuracy (plain ``python``, CPU, seed 0): bug 0.85, twin
0.7667 (the bug reads better: the twin's validation frames were never trained on)
"""

REPORT = "N155"
MECHANISM = "split-redrawn-on-resume"
SLUGS = ()
METRIC = ("reported_val_accuracy", 0.85, 0.7667)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
X = X + 0.35 * torch.randn(X.shape, generator=torch.Generator().manual_seed(3))  # noisy scans
Y = torch.tensor(d.target)
X, Y = X[:600], Y[:600]
SEED = __SEED__  # trainer_config.seed


def make_training_splits(n, seed):
    """80/20 train/val split of the labelled frames."""
    gen = torch.Generator().manual_seed(seed) if seed is not None else None
    order = torch.randperm(n, generator=gen)
    return order[: int(0.8 * n)], order[int(0.8 * n):]


checkpoint = None
for process_id in (11, 12):  # the first run, stopped after 60 epochs, then a new process resuming it
    torch.manual_seed(process_id)  # each process has its own unseeded randomness
    train_idx, val_idx = make_training_splits(len(X), SEED)
    model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    if checkpoint is not None:
        model.load_state_dict(checkpoint["model"])
        opt.load_state_dict(checkpoint["optimizer"])
    #@guard
    for epoch in range(60):
        for i in range(0, len(train_idx), 32):
            b = train_idx[i:i + 32]
            loss = F.cross_entropy(model(X[b]), Y[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
    checkpoint = {"model": model.state_dict(), "optimizer": opt.state_dict()}

with torch.no_grad():  # the resumed run's validation score
    val_acc = (model(X[val_idx]).argmax(1) == Y[val_idx]).float().mean().item()
print(f"METRIC {val_acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SEED__", "None" if bug else "42")
