"""The framework tests: each needs its framework (the test extra installs them), one intra-op
thread (tiny models on a shared machine), and runs a few steps on digits."""

import pytest


@pytest.fixture(autouse=True)
def _one_thread(one_thread):
    """tests/conftest.py's ``one_thread`` for every test here."""
