"""The wild corpus: one module per real-world silent training bug (see ``tests/wild/harness.py``)."""
