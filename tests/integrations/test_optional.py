"""Each integration is imported only when used: overt, overt.guard, the engine's default
composition and the doctor never import Lightning, transformers, accelerate or wandb."""

from __future__ import annotations

import json
import subprocess
import sys

from tests.conftest import REPO

HEAVY = ("lightning", "pytorch_lightning", "transformers", "accelerate", "datasets", "wandb",
         "overt.integrations.lightning", "overt.integrations.hf", "overt.integrations.wandb")


def test_no_framework_is_imported_unless_used(tmp_path):
    code = (
        "import json, sys, torch\n"
        "import overt\n"
        "from overt.config import TrainConfig\n"
        "from overt.compose import default_callbacks\n"
        "import overt.doctor.frameworks\n"
        "from pathlib import Path\n"
        "m = torch.nn.Linear(2, 2); g = overt.guard(m, torch.optim.SGD(m.parameters(), lr=0.1)); g.report(quiet=True)\n"
        f"default_callbacks(TrainConfig(progress='plain'), Path({str(tmp_path)!r}))\n"
        f"print(json.dumps(sorted(k for k in {HEAVY!r} if k in sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout.strip().splitlines()[-1]) == []


def test_a_missing_framework_is_a_clear_error_naming_the_extra():
    code = (
        "import sys\n"
        "for name in ('lightning', 'lightning.pytorch', 'pytorch_lightning', 'transformers'):\n"
        "    sys.modules[name] = None  # as if not installed\n"
        "from overt.errors import OvertError\n"
        "for module in ('overt.integrations.lightning', 'overt.integrations.hf'):\n"
        "    try:\n"
        "        __import__(module)\n"
        "    except OvertError as exc:\n"
        "        print(str(exc).replace(chr(10), ' '))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True,
                          env={"PYTHONPATH": str(REPO), "PATH": ""}, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    assert len(lines) == 2
    assert "overt[lightning]" in lines[0] and "overt[hf]" in lines[1]
