"""``total_loss += loss`` over an epoch: every step's autograd graph is kept alive.

Source: PyTorch FAQ, "My model reports 'cuda runtime error(2): out of memory'" -- "Don't accumulate
history across your training loop" (https://pytorch.org/docs/stable/notes/faq.html).  On CPU the
memory grows the same way; the epoch is short here, so the effect is the graph kept, not an OOM.
"""

from tests.wild.cases.common import STEP, loop

SLUGS = ("graph-leak",)


def script(bug: bool) -> str:
    keep = "total_loss += loss" if bug else "total_loss += loss.item()"
    return loop(before_epoch="    total_loss = 0\n", step=STEP + f"        {keep}\n")
