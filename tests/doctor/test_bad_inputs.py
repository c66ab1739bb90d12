"""`overt doctor` / `overt.doctor(...)` on inputs no probe can use: a clear error (exit 2), never a
traceback or a hang (issue 26)."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, IterableDataset, TensorDataset

import overt
from overt.doctor.cli import main
from overt.errors import ConfigError
from tests.doctor.helpers import FAST

SPEED = [f"{k}={v}" for k, v in FAST.items() if k != "batch_size"]

RECIPE = '''
import torch
from torch import nn
from torch.utils.data import TensorDataset
import overt

def build(cfg):
    model = nn.Linear(4, 2)
    train = TensorDataset(torch.randn({n}, 4), torch.randint(0, 2, ({n},)))
    return overt.Recipe(model={model}, optimizer=torch.optim.SGD(model.parameters(), lr=0.1),
                        loss_fn=nn.CrossEntropyLoss(), train_data=train)
'''


def _recipe(tmp_path, n=16, model="model"):
    path = tmp_path / "recipe.py"
    path.write_text(RECIPE.format(n=n, model=model))
    return str(path)


def test_an_empty_training_set_is_an_error_not_a_hang(tmp_path, capsys):
    assert main([_recipe(tmp_path, n=0), *SPEED, f"out={tmp_path / 'o'}", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the training data is empty (0 samples)" in err and "Traceback" not in err


def test_a_model_that_is_none_is_an_error(tmp_path, capsys):
    assert main([_recipe(tmp_path, model="None"), *SPEED, f"out={tmp_path / 'o'}", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "the model is NoneType, not a torch.nn.Module" in err and "Traceback" not in err


def test_out_naming_a_file_is_an_error(tmp_path, capsys):
    file = tmp_path / "note.txt"
    file.write_text("x")
    assert main([_recipe(tmp_path), *SPEED, f"out={file}", "--quiet"]) == 2
    assert f"out={file} is a file, not a folder" in capsys.readouterr().err
    model = nn.Linear(4, 2)
    data = TensorDataset(torch.randn(16, 4), torch.randint(0, 2, (16,)))
    with pytest.raises(ConfigError, match="is a file, not a folder"):
        overt.doctor(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(), data, out=file,
                     progress=False)


class _Nothing(IterableDataset):
    def __iter__(self):
        return iter(())


def test_the_throughput_probe_on_a_loader_without_batches_ends(tmp_path):
    """An iterable data set whose length is unknown and which yields nothing: the probes that need a
    batch fail naming why, the throughput probe included (it used to loop forever)."""
    model = nn.Linear(4, 2)
    report = overt.doctor(model, torch.optim.SGD(model.parameters(), lr=0.1), nn.CrossEntropyLoss(),
                          DataLoader(_Nothing(), batch_size=4), only=["throughput"], progress=False)
    (result,) = report.probes
    assert result.verdict.value == "fail" and "yields no batch" in (result.summary + " ".join(result.lines))


def test_a_project_file_whose_import_fails_is_an_error_naming_its_line(tmp_path, capsys):
    """A framework project (FILE.py:FUNCTION) that imports a package Python cannot find: the error
    names the line and where Python looked, not a traceback out of overt's loader."""
    project = tmp_path / "project.py"
    project.write_text("import os\nfrom my_helpers.data import digits  # not on the import path\n\n"
                       "def make():\n    return None\n")
    assert main([f"{project}:make", f"out={tmp_path / 'o'}", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert f"importing the project file {project} failed: No module named 'my_helpers'" in err
    assert f"where: {project}:2" in err and "PYTHONPATH" in err and "Traceback" not in err
    project.write_text("def make():\n    return None\n\nraise RuntimeError('no GPU here')\n")
    assert main([f"{project}:make", f"out={tmp_path / 'o'}", "--quiet"]) == 2
    err = capsys.readouterr().err
    assert "RuntimeError: no GPU here" in err and f"{project}:4" in err
