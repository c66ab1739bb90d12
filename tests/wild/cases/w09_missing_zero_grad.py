"""``optimizer.zero_grad()`` missing: every step applies the sum of all earlier gradients.

Source: Stack Overflow, "PyTorch MNIST example not converge"
(https://stackoverflow.com/questions/60335387), TrainCheck's ``stackoverflow-60335387``.
"""

from tests.wild.cases.common import STEP, loop

SLUGS = ("stale-gradients",)


def script(bug: bool) -> str:
    return loop(step=STEP.replace("        opt.zero_grad()\n", "") if bug else STEP)
