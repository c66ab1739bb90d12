"""The callbacks in two processes started by the frameworks' own launchers (slow: each run
starts two Python processes that import torch and the framework): Lightning's
``strategy="ddp"`` with ``devices=2`` (it starts the second process itself) and the Hugging
Face ``Trainer`` under ``torchrun --nproc_per_node 2``.  A planted bug is reported once, on
rank 0's stderr and in one ``guards.json``, naming both ranks; the clean run is quiet."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch.distributed as dist

from tests.conftest import REPO

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not dist.is_available() or not dist.is_gloo_available(),
                                 reason="torch.distributed with gloo is not available")]

SCRIPT = Path(__file__).parent / "projects" / "launched.py"


def _launch(framework: str, bug: str, out: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1"}
    if framework == "lightning":
        cmd = [sys.executable, str(SCRIPT), framework, bug, str(out)]
    else:
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2", str(SCRIPT), framework, bug,
               str(out)]
    return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400, cwd=REPO)


@pytest.mark.parametrize("framework, bug, slug", [
    ("lightning", "softmax-ce", "softmax-before-cross-entropy"),
    ("lightning", "none", None),
    ("hf", "frozen-mismatch", "params-not-optimized"),
    ("hf", "none", None),
])
def test_launched_by_the_framework_reports_once_on_rank_0(tmp_path, framework, bug, slug):
    pytest.importorskip("lightning" if framework == "lightning" else "transformers")
    done = _launch(framework, bug, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = [json.loads((tmp_path / f"result-{r}.json").read_text()) for r in (0, 1)]
    assert [r["world"] for r in ranks] == [2, 2] and ranks[0]["step"] == ranks[1]["step"] > 0
    (report,) = list((tmp_path / "root").rglob("guards.json"))
    found = json.loads(report.read_text())["findings"]
    if slug is None:
        assert found == [] and ranks[1]["findings"] == []
        assert done.stderr.count("overt guard: no findings.") == 1  # rank 0 only
        return
    assert [f["slug"] for f in found] == [slug] and found[0]["details"]["ranks"] == [0, 1]
    assert found == ranks[0]["findings"]
    # rank 0's own line as it is found, and the merged one (naming both ranks) at the end; rank 1 is silent
    assert done.stderr.count(f"{slug} [") <= 2 and "on ranks 0, 1" in done.stderr
