"""The readiness probes, each callable on its own.

Every probe takes the user's objects (it trains copies, never the originals) and returns a
:class:`~overt.doctor.result.ProbeResult` with a verdict, the evidence and the catalog slugs::

    from overt.doctor import probes
    result = probes.overfit_batch(model, optimizer, nn.CrossEntropyLoss(), batch, steps=200)
    assert result.passed, result.summary
"""

from overt.doctor.probes.bench import device_bench
from overt.doctor.probes.checkpoint import checkpoint, checkpoint_roundtrip, exact_resume
from overt.doctor.probes.data import check_data
from overt.doctor.probes.determinism import determinism
from overt.doctor.probes.gradients import gradient_flow
from overt.doctor.probes.initial_loss import initial_loss
from overt.doctor.probes.lr_find import lr_range_test
from overt.doctor.probes.overfit import overfit_batch
from overt.doctor.probes.parity import device_parity
from overt.doctor.probes.registration import hidden_containers, optimizer_registration
from overt.doctor.probes.throughput import throughput
from overt.doctor.probes.validation import validation_twice

__all__ = ["check_data", "checkpoint", "checkpoint_roundtrip", "determinism", "device_bench", "device_parity",
           "exact_resume", "gradient_flow", "hidden_containers", "initial_loss", "lr_range_test",
           "optimizer_registration", "overfit_batch", "throughput", "validation_twice"]
