"""CUDA tests: they run only where ``torch.cuda.is_available()``; elsewhere each is skipped with
the reason, so CI (no GPU) stays green.  ``scripts/gpu_check.sh`` runs them on a GPU machine."""

from __future__ import annotations

import pytest
import torch

from tests.conftest import SHARED_DATA

NO_CUDA = "CUDA is not available here: these tests run on a GPU machine (scripts/gpu_check.sh)"


def pytest_collection_modifyitems(config, items):
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason=NO_CUDA)
    for item in items:
        if "tests/cuda/" in str(item.fspath).replace("\\", "/"):
            item.add_marker(skip)


@pytest.fixture
def cuda():
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()
    return torch.device("cuda")


@pytest.fixture(scope="session")
def shakespeare():
    path = SHARED_DATA / "tinyshakespeare" / "input.txt"
    if not path.is_file():
        from tests.cuda.helpers import carried_text

        path = carried_text()
    if path is None or not path.is_file():
        pytest.skip("Tiny Shakespeare is absent (../shared/data/tinyshakespeare/input.txt or .gpudata/)")
    return path
