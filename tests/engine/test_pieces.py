"""The engine's pieces work alone, inside a hand-written loop (examples/pieces_in_a_hand_written_loop.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.conftest import REPO


@pytest.mark.parametrize("precision,accumulate", [("fp32", 1), ("fp16", 3)])
def test_hand_written_loop_with_overt_pieces_learns(precision, accumulate):
    proc = subprocess.run(
        [sys.executable, "examples/pieces_in_a_hand_written_loop.py", "--precision", precision,
         "--accumulate", str(accumulate), "--epochs", "6"],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    last = proc.stdout.strip().splitlines()[-1]
    accuracy = float(last.split("val/accuracy=")[1])
    assert accuracy > 0.93, last
