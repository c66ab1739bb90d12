"""A BatchNorm momentum in the Keras/TensorFlow convention (OVT212 ``batchnorm-momentum-inverted``,
lint face; issue 33).

PyTorch's BatchNorm ``momentum`` is the weight of the newest batch in the running statistics (default
0.1); Keras's and TensorFlow's is the weight of the old average (default 0.99).  A value copied across
(``nn.BatchNorm2d(64, momentum=0.9)``, PyTorch-YOLOv3#230; w131) makes the running statistics mostly the
last training batch's.  Reported on a call of torch's BatchNorm layers whose ``momentum`` keyword is a
number above 0.5 and below 1, written in the call or bound once at module level (``M = 0.9``); quiet on any
other expression (a parameter, an attribute: the caller decides) and on ``momentum=None``.

Quiet on 1 and above: in Keras's convention ``momentum=1`` would never update the statistics, a value nobody
writes, so 1 is no sign of that convention; in PyTorch's it keeps exactly the newest batch's statistics,
which meta-learning code asks for on purpose (normalising each episode with its own batch), and the fix
this rule suggests (0) would freeze them instead.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.analysis.events import module_constants
from overt.lint.index import FileIndex, kwarg
from overt.lint.rules.base import Hit, rule

LAYERS = ("BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "SyncBatchNorm", "LazyBatchNorm1d", "LazyBatchNorm2d",
          "LazyBatchNorm3d")
MAX_MOMENTUM = 0.5
KERAS_NEVER_UPDATES = 1.0  # Keras's momentum=1 keeps the old average forever: nobody writes it


def _number(ix: FileIndex, node: ast.AST | None) -> float | None:
    if isinstance(node, ast.Name):
        value = module_constants(ix).get(node.id)
    elif isinstance(node, ast.Constant):
        value = node.value
    else:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


@rule("batchnorm-momentum-inverted")
def batchnorm_momentum_inverted(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        layer = next((n for n in LAYERS if ix.call_is(call, n)), None)
        if layer is None:
            continue
        node = kwarg(call, "momentum")
        momentum = _number(ix, node)
        if momentum is None or momentum <= MAX_MOMENTUM or momentum >= KERAS_NEVER_UPDATES:
            continue
        yield Hit("batchnorm-momentum-inverted", call,
                  f"nn.{layer} with momentum={momentum:g}: PyTorch's momentum is the weight of the newest batch in "
                  f"the running statistics (Keras's and TensorFlow's is the weight of the old average), so they "
                  f"are {momentum:.0%} the last training batch's and evaluation normalises with one batch's "
                  "statistics",
                  fix=f"momentum={1 - momentum:.2g} (1 minus the Keras value; PyTorch's default is 0.1), or "
                  "momentum=None for a cumulative average")
