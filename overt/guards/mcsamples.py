"""Guard on Monte Carlo dropout passes that are all the same (slug ``mc-samples-identical``; issue 33: the samples
of a Monte Carlo estimate differ).

Monte Carlo dropout runs the model several times on one input and reads the uncertainty from the spread of the
outputs.  With the model in eval mode every dropout layer is off and the passes are one deterministic pass
repeated: variance 0 for every input, the uncertainty ranks errors at chance (TiagoCortinhal/SalsaNext#40).

Seen in evaluation only (forwards of a watched model in eval mode, where the session's forward hook is on
anyway), with no device work until the repetition is certain: the model has Dropout layers with ``p > 0`` and all
of them are in eval mode, and it is run ``REPEATS`` times in a row on the very same input tensor (the same Python
object, held by a weak reference, so a new batch at a reused address never counts) from one call expression of
the user's code (a loop or a comprehension).  Then, once per model, the last two passes' outputs are compared on
the device and the answer is read with the session's deferred reads (the next checked step, or the end of the
run): equal outputs are reported; different ones (a model that samples in eval mode too, a recurrent state) are
not, and the model is not looked at again.  A pass on another input starts the count again.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.sameviews import _call_site
from overt.guards.watched import _DROPOUT, output_tensors

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo

REPEATS = 3  # forwards in a row on one input tensor from one call expression before the outputs are compared


class _Run:
    """Consecutive eval-mode forwards of one model on one input tensor."""

    __slots__ = ("ref", "count", "site", "loc", "outputs", "handle")

    def __init__(self, x: torch.Tensor):
        self.ref = weakref.ref(x)
        self.count = 1
        self.site: tuple | None = None
        self.loc: str | None = None
        self.outputs: list[torch.Tensor] = []
        self.handle: Any = None


class McSampleChecks(Check):
    name = "mcsamples"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.runs: dict[int, _Run] = {}  # model id -> its current run of forwards on one input
        self.done: set[int] = set()  # models judged (reported, outputs that differ, or no dropout)

    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        key = id(info)
        if key in self.done:
            return
        x = args[0] if args and isinstance(args[0], torch.Tensor) else None
        run = self.runs.get(key)
        if x is None or run is None or run.ref() is not x:
            self._drop(run)
            if x is None:
                self.runs.pop(key, None)
                return
            if not any(isinstance(m, _DROPOUT) and getattr(m, "p", 0) > 0 for m in info.dropbn):
                self.done.add(key)  # no dropout: repeated passes are not Monte Carlo dropout
                return
            self.runs[key] = _Run(x)
            return
        run.count += 1
        if run.count < REPEATS - 1:
            return
        loc, site = _call_site()
        if site is None or (run.site is not None and site[:2] != run.site[:2]):
            self._drop(run)
            self.runs.pop(key, None)  # another call expression: not one loop repeating the pass
            return
        run.site, run.loc = site, loc
        if run.count == REPEATS - 1 or run.count == REPEATS:
            if run.handle is None:
                run.handle = info.module.register_forward_hook(
                    lambda module, a, out, _info=info, _run=run: self._output(_info, _run, out))

    def _output(self, info: ModelInfo, run: _Run, output: Any) -> None:
        out = next((t for t in output_tensors(output) if t.is_floating_point()), None)
        if out is None:
            self._drop(run)
            self.done.add(id(info))
            return
        run.outputs.append(out.detach())
        if len(run.outputs) < 2:
            return
        self._drop(run)
        self.done.add(id(info))
        self.runs.pop(id(info), None)
        a, b = run.outputs[-2:]
        dropouts = [m for m in info.dropbn if isinstance(m, _DROPOUT) and getattr(m, "p", 0) > 0]
        if any(m.training for m in dropouts) or a.shape != b.shape or a.dtype != b.dtype:
            return  # dropout on for the passes: a real Monte Carlo estimate
        differ = (a != b).any().reshape(1).float()  # read with the session's deferred reads: no sync here
        self.s.defer(differ, lambda values: self._judge(info, run, dropouts, values))

    def _judge(self, info: ModelInfo, run: _Run, dropouts: list, values: list[float]) -> None:
        if values[0]:
            return  # the passes differ (a model that samples in eval mode too): a real Monte Carlo estimate
        names = ", ".join(info.label(m) for m in dropouts[:3]) + ("..." if len(dropouts) > 3 else "")
        where = run.loc or "a forward"
        self.s.report(
            "mc-samples-identical",
            f"{info.name} was run {REPEATS} times in a row on the same input tensor at {where}, in eval mode, and "
            f"the outputs are identical: its {len(dropouts)} Dropout layer(s) ({names}) are off, so the repeated "
            "passes are one deterministic pass and any Monte Carlo estimate from them has variance 0 for every input "
            "(an uncertainty that ranks errors at chance).",
            fix=f"switch only the dropout layers back to training mode for the passes, after {info.name}.eval(): "
                "`for m in model.modules(): if isinstance(m, nn.Dropout): m.train()` (BatchNorm stays in eval mode)",
            where=where, key=f"{info.name}:{where}")

    @staticmethod
    def _drop(run: _Run | None) -> None:
        if run is not None and run.handle is not None:
            run.handle.remove()
            run.handle = None

    def remove_hooks(self) -> None:
        for run in self.runs.values():
            self._drop(run)
        self.runs.clear()
