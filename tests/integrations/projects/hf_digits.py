"""A Hugging Face Trainer project: a small model that returns its own loss, ``datasets.Dataset``
splits of digits, ``TrainingArguments``, and the planted bugs.

``bug``: None (clean), ``"softmax-ce"`` (probabilities into cross_entropy inside the model),
``"frozen-mismatch"`` (a hand-made optimizer holding only the head), ``"plain-list"`` (hidden
layers kept in a Python list: the Trainer never sees their weights).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from tests.integrations.projects.data import digits

BUGS = ("softmax-ce", "frozen-mismatch", "plain-list")


class DigitsClassifier(nn.Module):
    """``forward(x, labels=None) -> {"loss", "logits"}``, as a transformers model returns."""

    def __init__(self, bug: str | None = None):
        super().__init__()
        self.bug = bug
        torch.manual_seed(0)
        hidden = [nn.Linear(64, 32), nn.ReLU(), nn.Dropout(0.2)]
        if bug == "plain-list":
            self.hidden = hidden  # planted: a plain list, not nn.ModuleList / nn.Sequential
        else:
            self.hidden = nn.Sequential(*hidden)
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        h = x
        for layer in self.hidden:
            h = layer(h)
        logits = self.head(h)
        out = {"logits": logits}
        if labels is not None:
            scores = F.softmax(logits, dim=1) if self.bug == "softmax-ce" else logits
            out["loss"] = F.cross_entropy(scores, labels)
        return out


def datasets():
    """(train, eval) as ``datasets.Dataset`` with columns ``x`` and ``labels`` (torch format)."""
    from datasets import Dataset

    xt, yt, xv, yv = digits()
    train = Dataset.from_dict({"x": xt.numpy(), "labels": yt.numpy()}).with_format("torch")
    val = Dataset.from_dict({"x": xv.numpy(), "labels": yv.numpy()}).with_format("torch")
    return train, val


def arguments(out_dir: str, **kw):
    from transformers import TrainingArguments

    settings = dict(output_dir=out_dir, per_device_train_batch_size=32, per_device_eval_batch_size=128,
                    num_train_epochs=2, max_steps=16, learning_rate=0.05, logging_steps=4, eval_strategy="epoch",
                    save_strategy="no", report_to=[], use_cpu=True, seed=0, data_seed=0,
                    disable_tqdm=True, dataloader_num_workers=0)
    settings.update(kw)
    return TrainingArguments(**settings)


def build(bug: str | None = None, *, out_dir: str, callbacks=(), **kw):
    """The Trainer of this project (not yet trained)."""
    from transformers import Trainer

    model = DigitsClassifier(bug)
    train, val = datasets()
    optimizers = (None, None)
    if bug == "frozen-mismatch":
        optimizers = (torch.optim.SGD(model.head.parameters(), lr=0.05), None)
    return Trainer(model=model, args=arguments(out_dir, **kw), train_dataset=train, eval_dataset=val,
                   callbacks=list(callbacks), optimizers=optimizers)


def project():
    """``overt doctor tests/integrations/projects/hf_digits.py:project``: a ready Trainer."""
    import tempfile

    return build(None, out_dir=tempfile.mkdtemp(prefix="hf-digits-"))


def project_plain_list():
    import tempfile

    return build("plain-list", out_dir=tempfile.mkdtemp(prefix="hf-digits-"))
