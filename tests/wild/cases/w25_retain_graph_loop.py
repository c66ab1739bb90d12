"""``loss.backward(retain_graph=True)`` in the training loop "to silence an error": memory grows.

Source: PyTorch forums, "Memory leak when using retain_graph=True"-style threads, e.g.
https://discuss.pytorch.org/t/how-to-free-graph-manually/9255 ; the flag keeps every step's
graph buffers alive as long as anything references them, and hides the real bug it silenced.
"""

from tests.wild.cases.common import STEP, loop

SLUGS = ("retain-graph-in-loop",)


def script(bug: bool) -> str:
    return loop(step=STEP.replace("loss.backward()", "loss.backward(retain_graph=True)") if bug else STEP)
