"""One intra-op thread per guard test: tiny models on a shared 2-core machine run
faster and with steadier timings that way (restored after each test)."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """tests/conftest.py's ``one_thread`` for every test here."""
