"""Guard on evaluation loops with neither ``model.eval()`` nor ``torch.no_grad()``.

Slugs ``train-mode-in-eval`` (a model with Dropout/BatchNorm) and ``graph-in-eval`` (without):
the same catalog meanings as :mod:`overt.guards.modes`, for the case that check cannot see --
forwards in training mode with gradients on, which look like training until one notices that
nothing learns from them.

The tell: several forwards of a model in a row whose outputs no backward ever reaches, with no
optimizer step in between.  Each training-mode forward the session hooks (the first forwards of
every DataLoader pass, of a phase, of checked steps) is recorded with a pre-hook on its output's
``grad_fn``; at the next optimizer step (or the end of the run) the records made since the
previous step are judged: a run of ``EVAL_FORWARDS`` consecutive ones that no backward reached
means an evaluation.  Patterns that are not evaluations stay quiet: a GAN's generator forward (one per
step, reached by its own backward later), REINFORCE (many forwards, one backward before the
step), siamese or triplet forwards (reached by the one backward), and a module applied to values the
step's own graph computed (an input with a ``grad_fn``: a head run on each hidden state of a recurrence
whose outputs but the last are dropped): an evaluation's forwards start from data.  Steps are watched
only while records wait to be judged; unchecked training steps never get here.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from overt.guards import aside
from overt.guards.check import Check
from overt.guards.watched import output_tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

#: unreached training-mode forwards between two optimizer steps that make an evaluation
EVAL_FORWARDS = 3
#: records kept per model while waiting (a long evaluation needs no more to be judged)
KEEP = 16


class _Record:
    __slots__ = ("step", "reached", "loc")

    def __init__(self, step: int, loc: str | None):
        self.step = step
        self.reached = False
        self.loc = loc

    def hit(self, *_: Any) -> None:
        self.reached = True


class EvalLoopChecks(Check):
    name = "evalloop"

    def __init__(self, session: Any):
        super().__init__(session)
        self.records: dict[int, list[_Record]] = {}  # id(ModelInfo) -> this step's training-mode forwards
        self.infos: dict[int, ModelInfo] = {}
        self.pending: dict[int, tuple[_Record, Any]] = {}  # id(ModelInfo) -> (record, its post hook)
        self.stale: list[Any] = []  # hooks of forwards that raised, removed at the next event

    def on_train_forward(self, info: ModelInfo, args: tuple) -> None:
        if self.s.engine_loop:  # the engine evaluates under eval() and inference_mode itself
            return
        self._drop_stale()
        key = id(info)
        if key in self.pending or self.s.reporter.has(self._slug(info), info.name):
            return
        if any(t.grad_fn is not None for t in output_tensors(args)):
            return  # computed from the step's own graph (a branch of a training computation), not data
        recs = self.records.setdefault(key, [])
        recs[:] = [r for r in recs if r.step == self.s.step]  # older ones were judged at their step
        if len(recs) >= KEEP:
            return
        record = _Record(self.s.step, user_location(4))
        recs.append(record)
        self.infos[key] = info
        self.pending[key] = (record, info.module.register_forward_hook(aside.hook(self._post), always_call=True))
        self.s.watch_steps(self, True)

    def _post(self, module: Any, args: Any, output: Any) -> None:
        key = next((k for k, i in self.infos.items() if i.module is module), None)
        record, handle = self.pending.pop(key, (None, None)) if key is not None else (None, None)
        if handle is not None:
            if output is None and sys.exc_info()[1] is not None:
                # the forward raised: PyTorch is iterating the live hook dict, so removing a hook
                # now would cut the other hooks off (the session's own, which explains the error)
                self.stale.append(handle)
                return
            handle.remove()
        if record is None:
            return
        nodes = [t.grad_fn for t in output_tensors(output) if t.grad_fn is not None]
        if not nodes:
            record.reached = True  # no graph: nothing to judge
        for node in nodes[:4]:
            node.register_prehook(lambda grad_outputs, r=record: r.hit())

    def _drop_stale(self) -> None:
        while self.stale:
            self.stale.pop().remove()

    def on_step(self, oi: OptInfo) -> None:
        self._drop_stale()
        self._judge()
        if not any(self.records.values()):
            self.s.watch_steps(self, False)

    def end_of_run(self) -> None:
        self._judge()

    def _judge(self) -> None:
        """A run of ``EVAL_FORWARDS`` consecutive records (this step's, in order) none of which a
        backward reached is an evaluation; a reached record (a training forward) ends a run."""
        for key, recs in self.records.items():
            run: list[_Record] = []
            for r in recs:
                if r.step != self.s.step:
                    continue
                run = [] if r.reached else [*run, r]
                if len(run) >= EVAL_FORWARDS:
                    self._report(self.infos[key], run)
                    break
            recs.clear()

    @staticmethod
    def _slug(info: ModelInfo) -> str:
        return "train-mode-in-eval" if info.dropbn else "graph-in-eval"

    def _report(self, info: ModelInfo, recs: list[_Record]) -> None:
        loc = next((r.loc for r in recs if r.loc), None)
        where = f"{info.name} forward at {loc}" if loc else info.name
        if info.dropbn:
            names = ", ".join(f"{info.label(m)} ({type(m).__name__})" for m in info.dropbn[:3])
            self.s.report(
                "train-mode-in-eval",
                f"{info.name} ran {len(recs)} forwards in a row in training mode with gradients on, and no backward "
                "pass used their outputs and no optimizer step followed: an evaluation loop with neither "
                f"model.eval() nor torch.no_grad(). Its Dropout/BatchNorm layers ({names}) behave as in training "
                "(dropout on, BatchNorm statistics taken from, and updated by, the validation batches), so the "
                "metrics are noisy and wrong, and every forward builds a graph for nothing.",
                fix="model.eval() and "
                "`with torch.no_grad():` around the evaluation, model.train() after it.",
                where=where, key=info.name,
            )
        else:
            self.s.report(
                "graph-in-eval",
                f"{info.name} ran {len(recs)} forwards in a row with gradients on, and no backward pass used their "
                "outputs and no optimizer step followed: an evaluation without torch.no_grad() builds and keeps an "
                "autograd graph for nothing.",
                fix="wrap it in `with torch.no_grad():`; if the forwards are an evaluation, call model.eval() first too "
                "(not for an agent choosing its actions with a noisy network, whose training-mode noise is its "
                "exploration).",
                where=where, key=info.name,
            )

    def remove_hooks(self) -> None:
        for _, handle in self.pending.values():
            handle.remove()
        self.pending = {}
        self._drop_stale()
