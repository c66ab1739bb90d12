"""graph-in-eval and a volatile input built by a helper of the project, in code written for torch before 0.4.

Up to torch 0.3, ``Variable(x, volatile=True)`` switched autograd off; code of that era often builds its batches
in a helper that takes the flag as a parameter (``get_batch(source, i, evaluation=True)`` whose body is
``Variable(source[i:j], volatile=evaluation)``), so the evaluation asks for a volatile input by an argument,
not by a ``Variable`` call of its own (DARTS's recurrent search, fresh11-dev).  Which torch the project runs on
is read from its code when no packaging file names one: a folder with no sign either way is read with the
folders beside it, inside the tree being linted (the sibling folder of DARTS's convolutional cells writes
``.cuda(async=True)`` and ``loss.data[0]``; its ``reduction = True``, a variable, is not 0.4's loss keyword).
Quiet only where the volatile flag reaches the model's input and the era is torch < 0.4; every twin below
that breaks one of these is still reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.lint import lint_paths
from overt.lint.config import LintConfig

UTILS = '''from torch.autograd import Variable


def get_batch(source, i, bptt, evaluation=False):
    seq_len = min(bptt, len(source) - 1 - i)
    data = Variable(source[i:i + seq_len], volatile=evaluation)
    target = Variable(source[i + 1:i + 1 + seq_len])
    return data, target
'''

TEST = '''import torch
from torch import nn
from utils import get_batch

model = nn.Sequential(nn.Embedding(10, 8), nn.Dropout(0.5), nn.Linear(8, 10))
test_data = torch.LongTensor(100, 2).random_(10)


def evaluate(data_source, bptt=5):
    model.eval()
    total_loss = 0
    for i in range(0, data_source.size(0) - 1, bptt):
        data, targets = get_batch(data_source, i, bptt, evaluation=True)
        log_prob = model(data)
        loss = nn.functional.cross_entropy(log_prob.view(-1, 10), targets.view(-1)).data
        total_loss += loss * len(data)
    return total_loss[0] / len(data_source)


print(evaluate(test_data))
'''

SIBLING_03 = '''import torch
from torch.autograd import Variable


def train(model, loader, criterion, optimizer):
    for data, target in loader:
        target = Variable(target).cuda(async=True)
        loss = criterion(model(Variable(data)), target)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        print(loss.data[0])
'''

CELL = '''from torch import nn


class Cell(nn.Module):
    def __init__(self, reduction_prev, reduction):
        super().__init__()
        self.reduction = reduction


def cells(n):
    out = []
    for i in range(n):
        reduction = i in (n // 3, 2 * n // 3)
        if reduction:
            reduction = True
        out.append(Cell(False, reduction))
    return out
'''


def _project(root: Path, utils: str = UTILS, test: str = TEST, sibling: str | None = SIBLING_03,
             cell: str = CELL) -> Path:
    (root / ".git").mkdir()  # no packaging file: no torch floor
    (root / "rnn").mkdir()
    (root / "rnn" / "utils.py").write_text(utils)
    (root / "rnn" / "test.py").write_text(test)
    if sibling is not None:
        (root / "cnn").mkdir()
        (root / "cnn" / "train.py").write_text(sibling)  # async= does not parse on Python >= 3.7: read as text
        (root / "cnn" / "model.py").write_text(cell)
    return root / "rnn" / "test.py"


def _graph_in_eval(path: Path, root: Path) -> list:
    found, _ = lint_paths([path], LintConfig(root=root))
    return [f for f in found if f.slug == "graph-in-eval"]


def test_helper_volatile_input_in_torch_03_code_is_quiet(tmp_path):
    path = _project(tmp_path)
    assert _graph_in_eval(path, tmp_path) == []


@pytest.mark.parametrize("test", [
    TEST.replace("evaluation=True", "evaluation=False"),  # the helper's flag set off: a graph is built
    TEST.replace(", evaluation=True", ""),  # its default is off
])
def test_flag_not_asked_for_is_reported(tmp_path, test):
    path = _project(tmp_path, test=test)
    assert len(_graph_in_eval(path, tmp_path)) == 1


def test_helper_without_volatile_is_reported(tmp_path):
    path = _project(tmp_path, utils=UTILS.replace(", volatile=evaluation", ""))
    assert len(_graph_in_eval(path, tmp_path)) == 1


@pytest.mark.parametrize("sibling", [
    SIBLING_03 + "\nwith torch.no_grad():\n    pass\n",  # torch 0.4's API beside it: the flag is ignored there
    SIBLING_03.replace("async=True", "non_blocking=True").replace("loss.data[0]", "loss.item()"),
    "import torch\n",  # nothing beside says which torch: today's ignores the flag
    None,  # nothing beside at all
])
def test_era_not_shown_beside_is_reported(tmp_path, sibling):
    path = _project(tmp_path, sibling=sibling)
    assert len(_graph_in_eval(path, tmp_path)) == 1


def test_reduction_keyword_beside_is_torch_04(tmp_path):
    """``reduction='sum'`` given to a loss is 0.4's API (a plain ``reduction = True`` is not)."""
    cell = CELL + "\n\nloss_fn = nn.CrossEntropyLoss(reduction='sum')\n"
    path = _project(tmp_path, cell=cell)
    assert len(_graph_in_eval(path, tmp_path)) == 1


def test_folders_beside_are_read_only_inside_the_linted_tree(tmp_path):
    path = _project(tmp_path)
    assert len(_graph_in_eval(path, tmp_path / "rnn")) == 1  # the linted tree is rnn/ alone: cnn/ is not read
