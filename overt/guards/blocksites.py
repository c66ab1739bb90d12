"""The user's ``no_grad``/``inference_mode`` blocks, by site: which of them evaluate a watched model.

Two checks arm a training-mode model's forward when the user's code enters a ``no_grad`` block, since
an evaluation without ``eval()`` may begin there: per-sample independence
(:mod:`overt.guards.independence`) and train/serve skew (:mod:`overt.guards.skew`).  Each has a
bounded number of tries.  A block that runs no forward of a watched model (an EMA update after every
step, a weight clamp, a metric over outputs already computed) must not spend them, or a script that
updates an average under ``no_grad`` on every step leaves nothing for its evaluation:

- what a block's entry armed is taken back at its exit when no forward of the model came (the checks'
  ``no_grad_exited``, which say whether one came);
- a site (the function and line of the ``with``, or the decorated function) whose blocks ran no
  watched forward on each of its first :data:`EMPTY_ENTRIES` entries is not armed again, so such a
  loop stops paying for the arming after a few steps.  A site that ran one is always armed.

Counts, not times: the same program is armed at the same blocks on every machine.
"""

from __future__ import annotations

import sys
from typing import Any, Hashable

EMPTY_ENTRIES = 3  # entries without a watched forward after which a site is no longer armed


def block_site() -> tuple[Any, Hashable] | None:
    """``(code, line)`` of the ``no_grad``/``inference_mode`` block being entered, seen from the
    ``__enter__`` wrapper: the function with the ``with`` and its line, or the function under a
    ``@torch.no_grad()`` decorator and its first line (None if unknown)."""
    frame = sys._getframe(2)  # block_site <- __enter__ wrapper <- its caller
    if frame.f_code.co_filename.endswith("_contextlib.py"):  # @torch.no_grad(): the decorated function
        code = getattr(frame.f_locals.get("func"), "__code__", None)
        return None if code is None else (code, code.co_firstlineno)
    return frame.f_code, frame.f_lineno


class BlockSites:
    """Per session: the sites whose blocks were entered without a watched forward, and those that ran one."""

    def __init__(self) -> None:
        self.empty: dict[Hashable, int] = {}
        self.evaluates: set[Hashable] = set()

    def skip(self, site: Hashable) -> bool:
        """Whether a block at ``site`` should arm nothing: it never ran a watched forward in its first
        :data:`EMPTY_ENTRIES` entries."""
        return site not in self.evaluates and self.empty.get(site, 0) >= EMPTY_ENTRIES

    def closed(self, site: Hashable, saw: bool | None) -> None:
        """A block at ``site`` exited; ``saw``: whether a forward came to what its entry armed (None:
        nothing was armed, so nothing is learned)."""
        if saw is None:
            return
        if saw:
            self.evaluates.add(site)
            self.empty.pop(site, None)
        else:
            self.empty[site] = self.empty.get(site, 0) + 1
