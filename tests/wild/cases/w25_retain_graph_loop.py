"""``loss.backward(retain_graph=True)`` in the training loop "to silence an error": memory grows.

Source: GBLin5566/toward-controlled-generation-of-text-pytorch#9
(https://github.com/GBLin5566/toward-controlled-generation-of-text-pytorch/issues/9, "Memory blow up
when setting retain_graph = True") and pytorch/pytorch#40005 (https://github.com/pytorch/pytorch/issues/40005);
the flag keeps every step's graph buffers alive as long as anything references them, and hides
the real bug it silenced.
"""

from tests.wild.cases.common import STEP, loop

SLUGS = ("retain-graph-in-loop",)


def script(bug: bool) -> str:
    return loop(step=STEP.replace("loss.backward()", "loss.backward(retain_graph=True)") if bug else STEP)
