"""Missing values (NaN) in the input features: the loss and then every weight become NaN.

Source: Stack Overflow, "Why my Pytorch model is giving nan as loss"-style reports such as
https://discuss.pytorch.org/t/nan-loss-coming-after-some-time/11568; the usual cause is a NaN
in the raw data (a missing value, a division by zero in preprocessing).
"""

from tests.wild.cases.common import PRELUDE, loop

SLUGS = ("non-finite",)

_HOLE = "X[7, 3] = float('nan')  # a missing value in the raw table\n"


def script(bug: bool) -> str:
    return loop().replace(PRELUDE, PRELUDE.replace("Y = torch.tensor", (_HOLE if bug else "") + "Y = torch.tensor"))
