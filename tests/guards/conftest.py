"""One intra-op thread per guard test: tiny models on a shared 2-core machine run
faster and with steadier timings that way (restored after each test)."""

import pytest
import torch


@pytest.fixture(autouse=True)
def _one_thread():
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
