"""Missing values (NaN) in the input features: the loss and then every weight become NaN.

Source: prs-eth/Marigold#111 (https://github.com/prs-eth/Marigold/issues/111: loss=nan "when input batch
contains NaN values") and ratschlab/DeepSpot#9 (https://github.com/ratschlab/DeepSpot/issues/9: NaNs
in the input from empty spots); the usual cause is a missing value or a division by zero in
preprocessing.
"""

from tests.wild.cases.common import PRELUDE, loop

SLUGS = ("non-finite",)

_HOLE = "X[7, 3] = float('nan')  # a missing value in the raw table\n"


def script(bug: bool) -> str:
    return loop().replace(PRELUDE, PRELUDE.replace("Y = torch.tensor", (_HOLE if bug else "") + "Y = torch.tensor"))
