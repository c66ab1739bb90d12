"""The framework tests: each needs its framework (the test extra installs them), one intra-op
thread (tiny models on a shared machine), and runs a few steps on digits."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
