"""graph-in-eval and ``Variable(..., volatile=True)``: up to torch 0.3 the flag is how autograd was switched off
(no graph is built), from torch 0.4 on it is ignored.  Whether an evaluation that uses it builds a graph depends
on the torch the project allows: quiet when the project's torch floor is below 0.4, reported otherwise (and when
no floor is said, the torch a new user installs today ignores the flag), unless the project's code beside the
file says it is written for torch before 0.4 (``.cuda(async=True)``, ``loss.data[0]``) and uses nothing of 0.4's
API (``.item()``, ``torch.no_grad``...): tsn-pytorch and bottom-up-attention-vqa, which name no torch version."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.lint import lint_paths
from overt.lint.config import LintConfig

SCRIPT = '''import torch
import torch.nn.functional as F
from torch import nn
from torch.autograd import Variable

model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 3))
test_loader = [(torch.randn(2, 4), torch.tensor([0, 1]))]


def test(model):
    model.eval()
    correct = 0
    for data, target in test_loader:
        data = Variable(data, volatile=True)
        output = model(data)
        correct += (output.argmax(1) == target).sum()
    return correct


print(test(model))
'''


def _write(root: Path, name: str, text: str) -> Path:
    path = root / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.mark.parametrize(("files", "found"), [
    ({"requirements.txt": "torch==0.3.0.post4\ntorchvision==0.2.0\n"}, False),  # volatile=True works there
    ({"requirements.txt": "torch>=1.0\n"}, True),  # every allowed torch ignores the flag
    ({}, True),  # no floor said: today's torch ignores it
])
def test_volatile_counts_only_where_the_project_allows_torch_below_0_4(tmp_path, files, found):
    (tmp_path / ".git").mkdir()  # the repository's root: the search for packaging files stops here
    for name, text in files.items():
        _write(tmp_path, name, text)
    p = _write(tmp_path, "mnist/eval_net.py", SCRIPT)
    result, _ = lint_paths([p], LintConfig(root=tmp_path))
    assert bool([f for f in result if f.slug == "graph-in-eval"]) is found


TRAIN_03 = """import torch
from torch.autograd import Variable


def train(model, loader, criterion, optimizer):
    for data, target in loader:
        target = target.cuda(async=True)
        loss = criterion(model(Variable(data)), Variable(target))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.data[0])
"""

TRAIN_NEW = TRAIN_03.replace("async=True", "non_blocking=True").replace("loss.data[0]", "loss.item()")


@pytest.mark.parametrize(("beside", "found"), [
    (TRAIN_03, False),  # the project is written for torch 0.3 (async=, loss.data[0]): volatile works there
    (TRAIN_03 + "\nwith torch.no_grad():\n    pass\n", True),  # 0.4's API beside it: the flag is ignored
    (TRAIN_NEW, True),  # written for torch >= 0.4 (.item(), non_blocking=)
    ("import torch\n", True),  # nothing says which torch: today's ignores the flag
])
def test_volatile_in_code_written_for_torch_before_0_4(tmp_path, beside, found):
    (tmp_path / ".git").mkdir()  # no packaging file: no torch floor
    _write(tmp_path, "main.py", beside)  # main.py with async= does not parse on Python >= 3.7: read as text
    p = _write(tmp_path, "test_models.py", SCRIPT.replace("torch.tensor(", "torch.LongTensor("))  # 0.3's API
    result, _ = lint_paths([p], LintConfig(root=tmp_path))
    assert bool([f for f in result if f.slug == "graph-in-eval"]) is found
