"""every-rank-saves on a helper another module calls: the helper's own file never calls it, so whether every
rank writes is decided at its call sites in the modules that import it (vdvae's train_helpers.save_model, called
only under ``if ... and H.rank == 0:`` in train.py, fresh8-test).  A call site without the rank test, or no
importer found, keeps the finding."""

from __future__ import annotations

from pathlib import Path

import pytest

from overt.lint import lint_paths
from overt.lint.config import LintConfig

HELPERS = """\
import torch
import torch.distributed as dist
from torch.nn.parallel import DistributedDataParallel


def wrap(model, rank):
    dist.init_process_group("nccl")
    return DistributedDataParallel(model, device_ids=[rank])


def save_checkpoint(path, model, optimizer):
    torch.save(model.state_dict(), path + "-model.pt")
    torch.save(optimizer.state_dict(), path + "-opt.pt")
"""

TRAIN = """\
import torch
from helpers import save_checkpoint, wrap


def main(rank, model, loader, steps):
    model = wrap(model, rank)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step, (x, y) in enumerate(loader):
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0 and rank == 0:
            save_checkpoint("latest", model, opt)
    {last}
"""


@pytest.mark.parametrize("last, train, expected", [
    ('if rank == 0:\n        save_checkpoint("final", model, opt)', True, []),
    ('save_checkpoint("final", model, opt)', True, [12, 13]),  # the final save runs on every rank
    ("pass", False, [12, 13]),  # no module calls the helper: as before, taken as run by every rank
])
def test_a_helper_saved_only_under_its_callers_rank_test_is_quiet(tmp_path: Path, last, train, expected):
    (tmp_path / ".git").mkdir()
    (tmp_path / "helpers.py").write_text(HELPERS)
    if train:
        (tmp_path / "train.py").write_text(TRAIN.format(last=last))
    found, errors = lint_paths([tmp_path], LintConfig(root=tmp_path))
    assert errors == []
    assert [f.line for f in found if f.slug == "every-rank-saves" and f.path.endswith("helpers.py")] == expected
