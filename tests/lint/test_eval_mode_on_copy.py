"""eval-mode-in-train and a helper that switches a deep copy of the model to eval mode.

A helper called from the training loop that starts with ``model = deepcopy(model)`` and then calls
``model.eval()`` (an adversarial attack crafted on a frozen copy, Person_reID_baseline_pytorch's ODFA,
fresh11-test) changes the mode of its copy only: the module the loop trains keeps its training mode, so
nothing is left in eval mode.  Twins where the helper switches the caller's module itself (no copy, a copy
under another name, a copy made only on one branch or after the switch) are still reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.lint import lint_paths
from overt.lint.config import LintConfig

ATTACK = '''from copy import deepcopy

import torch


def attack(model, x, eps=0.01):
    model = deepcopy(model)
    model.eval()
    x = x.clone().requires_grad_(True)
    model(x).norm().backward()
    return (x + eps * x.grad.sign()).detach()
'''

TRAIN = '''import torch
from torch import nn
from attack import attack

model = nn.Sequential(nn.Linear(4, 8), nn.BatchNorm1d(8), nn.Dropout(0.5), nn.Linear(8, 3))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
loader = [(torch.randn(8, 4), torch.randint(0, 3, (8,))) for _ in range(4)]

model.train()
for epoch in range(3):
    for step, (x, y) in enumerate(loader):
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        if step % 2 == 0:
            x_adv = attack(model, x)
            loss = loss + nn.functional.cross_entropy(model(x_adv), y)
        loss.backward()
        optimizer.step()
'''


def _lint(tmp_path: Path, attack: str, train: str = TRAIN) -> list:
    (tmp_path / ".git").mkdir()
    (tmp_path / "attack.py").write_text(attack)
    (tmp_path / "train.py").write_text(train)
    found, _ = lint_paths([tmp_path / "train.py"], LintConfig(root=tmp_path))
    return [f for f in found if f.slug == "eval-mode-in-train"]


def test_eval_on_a_deep_copy_in_an_imported_helper_is_quiet(tmp_path):
    assert _lint(tmp_path, ATTACK) == []


def test_eval_on_a_deep_copy_in_a_helper_of_the_same_file_is_quiet(tmp_path):
    helper = ATTACK.replace("from copy import deepcopy\n", "import copy\n").replace("deepcopy(model)",
                                                                                   "copy.deepcopy(model).cuda()")
    body = helper.split("import torch\n", 1)[1]
    train = TRAIN.replace("from attack import attack\n", "import copy\n" + body)
    assert _lint(tmp_path, "", train) == []


@pytest.mark.parametrize("attack", [
    ATTACK.replace("    model = deepcopy(model)\n", ""),  # the caller's model itself is switched
    ATTACK.replace("model = deepcopy(model)", "frozen = deepcopy(model)"),  # copied, but the original switched
    ATTACK.replace("    model = deepcopy(model)\n", "    if eps > 1:\n        model = deepcopy(model)\n"),  # one branch
    ATTACK.replace("    model = deepcopy(model)\n    model.eval()\n", "    model.eval()\n    model = deepcopy(model)\n"),
])
def test_eval_on_the_callers_model_is_reported(tmp_path, attack):
    assert len(_lint(tmp_path, attack)) == 1
