"""``overt run`` never changes what a script does: each script in ``scripts/`` runs plainly and
under ``overt run`` (in two fresh directories, side by side) and both runs must print the same
stdout, write the same files (hashed; a torch.save archive by its members, less the per-save
``serialization_id``), exit with the same code and, once overt's own ``overt guard:`` lines are
taken out, write the same stderr (tracebacks included)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from tests.conftest import REPO

SCRIPTS = Path(__file__).parent / "scripts"

CASES = {
    "tiny-steps-argparse": ("tiny_steps.py", ["--steps", "300", "--lr", "0.02"]),
    "numpy-data-torch-load": ("numpy_data.py", []),
    "dataset-workers-scheduler-checkpoints": ("dataset_checkpoint.py", ["--epochs", "3"]),
    "sys-exit-number-in-loop": ("exits.py", ["--how", "number"]),
    "uncaught-error": ("exits.py", ["--how", "raise", "--at", "2"]),
}
# every case starts two interpreters (a few seconds of CPU each): the other exits are slow tests
SLOW = {
    "sys-exit-message": ("exits.py", ["--how", "message", "--at", "1"]),
    "sys-exit-none": ("exits.py", ["--how", "none"]),
    "finishes": ("exits.py", ["--how", "finish"]),
}
PARAMS = [*CASES, *(pytest.param(c, marks=pytest.mark.slow) for c in SLOW)]


def _hash(path: Path) -> str:
    h = hashlib.sha256()
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            for name in sorted(z.namelist()):
                if not name.endswith("serialization_id"):
                    h.update(name.encode() + b"\0" + z.read(name))
    else:
        h.update(path.read_bytes())
    return h.hexdigest()


def _files(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): _hash(p) for p in sorted(root.rglob("*"))
            if p.is_file() and "__pycache__" not in p.parts}


def _start(cwd: Path, argv: list[str]) -> subprocess.Popen:
    shutil.copytree(SCRIPTS, cwd)
    env = {**os.environ, "PYTHONPATH": str(REPO), "OMP_NUM_THREADS": "1", "PYTHONHASHSEED": "0"}
    env.pop("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", None)
    return subprocess.Popen([sys.executable, *argv], cwd=cwd, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


@pytest.mark.parametrize("case", PARAMS)
def test_same_behaviour_plain_and_under_overt_run(case, tmp_path):
    script, args = {**CASES, **SLOW}[case]
    plain_dir, overt_dir = tmp_path / "plain", tmp_path / "overt"
    plain = _start(plain_dir, [script, *args])
    # dataloader-starvation is the one timing-based guard: on a loaded machine it may fire; its
    # line would be taken out with the others anyway, the flag only keeps the report stable
    overt = _start(overt_dir, ["-m", "overt", "run", "--allow-errors", "--ignore", "dataloader-starvation", script, *args])
    p_out, p_err = plain.communicate(timeout=300)
    o_out, o_err = overt.communicate(timeout=300)
    assert o_out == p_out
    assert overt.returncode == plain.returncode, o_err
    assert _files(overt_dir) == _files(plain_dir)
    ours = [line for line in o_err.splitlines() if line.startswith("overt guard: ")]
    assert ours and "internal error" not in o_err, o_err
    o_err = "".join(line for line in o_err.splitlines(keepends=True) if not line.startswith("overt guard: "))
    assert o_err.replace(str(overt_dir), "<dir>") == p_err.replace(str(plain_dir), "<dir>")
