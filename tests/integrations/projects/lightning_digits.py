"""A Lightning project: an MLP with dropout on digits, a LightningDataModule, and the planted bugs.

``bug``: None (clean), ``"softmax-ce"`` (probabilities into cross_entropy),
``"eval-in-train-mode"`` (a hand-written evaluation in ``on_train_epoch_end`` under no_grad,
model left in train mode), ``"manual-no-zero-grad"`` (manual optimisation without
``zero_grad``), ``"frozen-mismatch"`` (the optimizer holds only the head; the body still
trains on paper), ``"frozen-weights"`` (a name filter that freezes every weight matrix: only
biases train), ``"overflow-at-step-2"`` (the loss of optimizer step 2 times inf).
"""

from __future__ import annotations

import lightning.pytorch as L
import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.integrations.projects.data import digits

BUGS = ("softmax-ce", "eval-in-train-mode", "manual-no-zero-grad", "frozen-mismatch", "frozen-weights",
        "overflow-at-step-2")


class DigitsData(L.LightningDataModule):
    def __init__(self, batch_size: int = 32):
        super().__init__()
        self.batch_size = batch_size

    def setup(self, stage: str | None = None) -> None:
        xt, yt, xv, yv = digits()
        self.train_set, self.val_set = TensorDataset(xt, yt), TensorDataset(xv, yv)

    def train_dataloader(self) -> DataLoader:
        return DataLoader(self.train_set, batch_size=self.batch_size, shuffle=True,
                          generator=torch.Generator().manual_seed(0))

    def val_dataloader(self) -> DataLoader:
        return DataLoader(self.val_set, batch_size=128)


class DigitsModule(L.LightningModule):
    def __init__(self, bug: str | None = None, lr: float = 0.05):
        super().__init__()
        self.bug = bug
        self.lr = lr
        self.net = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2), nn.Linear(32, 10))
        if bug == "manual-no-zero-grad":
            self.automatic_optimization = False
        if bug == "frozen-weights":  # planted: the filter matches every weight matrix, not one layer's
            for name, p in self.named_parameters():
                if "weight" in name:
                    p.requires_grad_(False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x)

    def _loss(self, logits: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        if self.bug == "softmax-ce":
            return F.cross_entropy(F.softmax(logits, dim=1), y)
        return F.cross_entropy(logits, y)

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = self._loss(self(x), y)
        if self.bug == "overflow-at-step-2" and self.trainer.global_step == 2:
            loss = loss * torch.tensor(float("inf"))  # planted: non-finite gradients at step 2
        if not self.automatic_optimization:
            opt = self.optimizers()
            self.manual_backward(loss)
            opt.step()  # planted: no opt.zero_grad()
        self.log("train_loss", loss, on_step=False, on_epoch=True)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        self.log("val_loss", F.cross_entropy(logits, y))
        self.log("val_acc", (logits.argmax(1) == y).float().mean())

    def on_train_epoch_end(self) -> None:
        if self.bug == "eval-in-train-mode":  # planted: no self.eval() around a hand-written evaluation
            loader = self.trainer.datamodule.val_dataloader()
            correct = 0
            with torch.no_grad():
                for x, y in loader:
                    correct += int((self(x).argmax(1) == y).sum())
            self.log("manual_val_acc", correct / len(loader.dataset))

    def configure_optimizers(self):
        params = self.net[3].parameters() if self.bug == "frozen-mismatch" else self.parameters()
        return torch.optim.SGD(params, lr=self.lr, momentum=0.9)


def fit(bug: str | None = None, *, callbacks=(), root: str, epochs: int = 2, limit_train_batches: int = 8,
        logger=True, devices: int = 1, datamodule: L.LightningDataModule | None = None, **trainer_kw):
    """Train for ``epochs`` (a few batches each) and return (trainer, module)."""
    L.seed_everything(0, verbose=False)
    module = DigitsModule(bug)
    trainer = L.Trainer(max_epochs=epochs, limit_train_batches=limit_train_batches, accelerator="cpu",
                        devices=devices, default_root_dir=root, callbacks=list(callbacks),
                        logger=L.loggers.CSVLogger(root, name="logs") if logger is True else logger,
                        enable_progress_bar=False, enable_model_summary=False, enable_checkpointing=False,
                        num_sanity_val_steps=0, deterministic=True, **trainer_kw)
    trainer.fit(module, datamodule=datamodule or DigitsData())
    return trainer, module


def project():
    """``overt doctor tests/integrations/projects/lightning_digits.py:project``"""
    return DigitsModule(), DigitsData()


def project_frozen_mismatch():
    return DigitsModule("frozen-mismatch"), DigitsData()
