"""Testing what you train: smoke-test assertions for a recipe or for your own objects.

Each helper takes either a recipe (a built-in name, a ``.py`` path, a module or
an :class:`overt.Recipe`) plus config overrides, or your objects
``(model, optimizer, loss_fn, data)``; it trains copies, never your originals,
and raises ``AssertionError`` with the measurements, the likely causes and the
fix when the check fails::

    from overt import testing

    testing.assert_loss_decreases("recipe.py")
    testing.assert_overfits_batch(model, optimizer, nn.CrossEntropyLoss(), train_dataset)
    testing.assert_deterministic("digits", epochs=1)
    testing.assert_checkpoint_roundtrip("recipe.py")

The checks are the doctor's probes (:mod:`overt.doctor.probes`), run on their
own.  The pytest plugin (:mod:`overt.testing.plugin`, registered through the
``pytest11`` entry point) adds the ``overt`` marker and the ``overt_recipe``,
``overt_train`` and ``overt_shared_data`` fixtures.
"""

from overt.testing.asserts import (
    assert_checkpoint_roundtrip,
    assert_deterministic,
    assert_loss_decreases,
    assert_overfits_batch,
)
from overt.testing.subject import Subject, subject

__all__ = ["Subject", "assert_checkpoint_roundtrip", "assert_deterministic", "assert_loss_decreases",
           "assert_overfits_batch", "subject"]
