"""graph-in-eval and ``Variable(..., volatile=True)``: up to torch 0.3 the flag is how autograd was switched off
(no graph is built), from torch 0.4 on it is ignored.  Whether an evaluation that uses it builds a graph depends
on the torch the project allows: quiet when the project's torch floor is below 0.4, reported otherwise (and when
no floor is said, the torch a new user installs today ignores the flag)."""

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
