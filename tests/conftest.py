"""Shared fixtures: real small data sets (digits ships with scikit-learn; MNIST-t10k
from ../shared/data when present, skipped otherwise)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# overt train records the recipe files it ran in a machine-local file (overt.recipes.trust); the tests use
# their own, shared with the subprocesses they start, never the user's
if "OVERT_TRUST_FILE" not in os.environ:
    import tempfile

    os.environ["OVERT_TRUST_FILE"] = os.path.join(tempfile.mkdtemp(prefix="overt-trust-"), "trusted-recipes.json")
# the busy-machine note (overt.engine.busy) says how busy the machine is: no test's output may depend on
# that, so it is off here and in every subprocess (tests/engine/test_busy.py turns it on with fixed numbers)
os.environ["OVERT_BUSY_NOTE"] = "0"
SHARED_DATA = REPO.parent / "shared" / "data"

#: catalog entries that measure time, not correctness: on a busy machine (another job, a loaded CI
#: runner) they can appear on a correct program, so a test that asserts "the guards found nothing"
#: leaves them out -- the guard's own tests (tests/guards/test_data.py) plant and check them
TIMING = frozenset({"dataloader-starvation"})


#: the marker every test of a folder carries (pyproject.toml describes them): ``-m gpu``, ``-m 'not distributed'``
FOLDER_MARKERS = {"cuda": "gpu", "distributed": "distributed"}


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects by marker
def pytest_collection_modifyitems(config, items):
    tests = REPO / "tests"
    for item in items:
        path = Path(str(item.fspath))
        if path.is_relative_to(tests) and path.relative_to(tests).parts[0] in FOLDER_MARKERS:
            item.add_marker(FOLDER_MARKERS[path.relative_to(tests).parts[0]])


def correctness_findings(findings: list) -> list:
    """``findings`` (dicts from a summary, or Finding objects) without the :data:`TIMING` ones."""
    return [f for f in findings if (f["slug"] if isinstance(f, dict) else f.slug) not in TIMING]


@pytest.fixture(autouse=True)
def _restore_excepthook():
    """torch's init_process_group wraps sys.excepthook for good (every traceback line gets a
    "[rank0]:" prefix, even after destroy_process_group): a test that starts a process group must not
    change how a later test's tracebacks look."""
    hook = sys.excepthook
    yield
    sys.excepthook = hook


@pytest.fixture
def one_thread():
    """One intra-op thread for the test (restored after): tiny models on a shared 2-core machine run
    faster and with steadier timings that way.  Directories whose tests all want it use it autouse."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(scope="session")
def digits():
    """(train, val) TensorDatasets of sklearn digits, split 80/20 with a fixed seed."""
    from overt.recipes.digits import load_digits_split

    return load_digits_split(0.2, 0)


@pytest.fixture(scope="session")
def mnist_dir() -> Path:
    path = SHARED_DATA / "mnist-t10k"
    if not path.is_dir():
        pytest.skip("../shared/data/mnist-t10k is not present")
    return path


def run_overt(*args: str, cwd: Path | None = None, timeout: float = 300, **env: str) -> subprocess.CompletedProcess:
    """Run ``python -m overt ARGS`` in a subprocess with this checkout on the path."""
    environ = {**os.environ, "PYTHONPATH": str(REPO) + os.pathsep + os.environ.get("PYTHONPATH", ""), **env}
    return subprocess.run([sys.executable, "-m", "overt", *args], cwd=cwd or REPO, env=environ,
                          capture_output=True, text=True, timeout=timeout)
