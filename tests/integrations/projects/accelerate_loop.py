"""An Accelerate training loop on digits, two overt lines in it, and the planted bugs.

``bug``: None (clean), ``"no-zero-grad"``, ``"eval-in-train-mode"`` (evaluation under no_grad
without ``model.eval()``), ``"softmax-ce"``, ``"frozen-mismatch"`` (the optimizer holds only
the head).  ``guard=False`` runs the same loop without overt.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integrations.projects.data import digits

BUGS = ("no-zero-grad", "eval-in-train-mode", "softmax-ce", "frozen-mismatch")


def train(bug: str | None = None, *, guard: bool = True, epochs: int = 2, steps_per_epoch: int = 10,
          stream=None, **guard_kw) -> dict:
    """Train; returns {"losses": [...], "val_loss": [...], "findings": [...]}."""
    from accelerate import Accelerator
    from accelerate.utils import set_seed

    import overt

    set_seed(0)
    accelerator = Accelerator(cpu=True)
    xt, yt, xv, yv = digits()
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
    params = model[3].parameters() if bug == "frozen-mismatch" else model.parameters()
    optimizer = torch.optim.SGD(params, lr=0.05, momentum=0.9)
    train_loader = DataLoader(TensorDataset(xt, yt), batch_size=32, shuffle=True,
                              generator=torch.Generator().manual_seed(0))
    val_loader = DataLoader(TensorDataset(xv, yv), batch_size=128)
    model, optimizer, train_loader, val_loader = accelerator.prepare(model, optimizer, train_loader, val_loader)

    g = overt.guard(model, optimizer, stream=stream, **guard_kw) if guard else None  # overt line 1
    losses, val_losses = [], []
    for _ in range(epochs):
        model.train()
        for i, (x, y) in enumerate(train_loader):
            if i == steps_per_epoch:
                break
            logits = model(x)
            loss = F.cross_entropy(F.softmax(logits, dim=1) if bug == "softmax-ce" else logits, y)
            accelerator.backward(loss)
            optimizer.step()
            if bug != "no-zero-grad":
                optimizer.zero_grad()
            losses.append(loss.detach())
        if bug != "eval-in-train-mode":
            model.eval()
        total, n = torch.zeros(()), 0
        with torch.no_grad():
            for x, y in val_loader:
                total += F.cross_entropy(model(x), y, reduction="sum")
                n += len(y)
        val_losses.append(float(total) / n)
    findings = g.report(quiet=stream is None) if g is not None else []  # overt line 2
    return {"losses": [float(v) for v in losses], "val_loss": val_losses, "findings": findings}
