"""Guard on evaluating a copy of the model that training never updates (slug ``eval-model-stale``).

An invariant of a training run: the model that is evaluated between training epochs is the model
being trained, or something made from it (a snapshot loaded from it, an EMA that is updated).
``eval_model = copy.deepcopy(model)`` made once before training (or an EMA whose ``update()`` is
never called, a model variable confused with another) breaks it: every evaluation scores the
initial weights, while the run looks normal.

What is proven before anything is said, on host metadata only (parameter version counters, no
device value): a watched model ``E`` that no optimizer holds runs an evaluation pass (at least
:data:`PASS_FORWARDS` forwards in eval mode with no optimizer step in between: a frozen teacher or
reference model run once per training step is not one) twice; between the two passes optimizers
stepped, a trained model ``T`` with exactly ``E``'s parameter shapes (a copy of it) changed, and
not one of ``E``'s parameters changed (no ``load_state_dict``, no ``copy_``, no EMA update).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from overt.guards.check import Check
from overt.text import first_names

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

PASS_FORWARDS = 3  # eval-mode forwards with no optimizer step in between: an evaluation pass
MAX_PARAMS = 256  # parameters whose version counters are compared


def _versions(module: Any) -> tuple[tuple[int, int], ...]:
    return tuple((id(p), p._version) for p in list(module.parameters())[:MAX_PARAMS])


def param_shapes(module: Any) -> tuple[tuple[int, ...], ...]:
    """Every parameter's shape, in order: two modules of one architecture have equal ones."""
    return tuple(tuple(p.shape) for p in module.parameters())


def trained_copies(session: Any, info: ModelInfo) -> list[ModelInfo]:
    """Watched models an optimizer trains whose parameter shapes are ``info``'s, when no optimizer
    holds ``info``'s own parameters ([] when one does: ``info`` is itself trained)."""
    held = {id(p) for oi in session.optimizers.values() for p in oi.params}
    own = list(info.module.parameters())
    if not own or any(id(p) in held for p in own):
        return []
    shapes = param_shapes(info.module)
    return [m for m in session.models.values() if m is not info and param_shapes(m.module) == shapes
            and any(id(p) in held for p in m.module.parameters())]


class _Eval:
    __slots__ = ("step", "run", "passes", "snapshot", "others")

    def __init__(self) -> None:
        self.step = -1  # the session's step at the latest eval forward
        self.run = 0  # eval forwards in a row at that step
        self.passes = 0  # evaluation passes seen
        self.snapshot: tuple | None = None  # its parameters' versions at the first pass
        self.others: dict[int, tuple] = {}  # id(trained copy's ModelInfo) -> its versions then


class StaleEvalChecks(Check):
    name = "stale_eval"

    def __init__(self, session: Any):
        super().__init__(session)
        self.evals: dict[int, _Eval] = {}

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._forward(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._forward(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        """The first ``PASS_FORWARDS`` forwards of every evaluation pass (they make it a pass)."""
        if self.s.reporter.has("eval-model-stale", info.name):
            return False
        st = self.evals.get(id(info))
        if st is None:
            return len(self.evals) < 8
        return st.step != self.s.step or st.run < PASS_FORWARDS

    def _forward(self, info: ModelInfo) -> None:
        if info.module.training or self.s.reporter.has("eval-model-stale", info.name):
            return
        st = self.evals.get(id(info))
        if st is None:
            if len(self.evals) >= 8:
                return
            st = self.evals[id(info)] = _Eval()
        if st.step != self.s.step:
            st.step, st.run = self.s.step, 0
        st.run += 1
        if st.run != PASS_FORWARDS:
            return
        st.passes += 1  # an evaluation pass: PASS_FORWARDS eval forwards with no optimizer step between
        if st.passes == 1 or st.snapshot is None:
            copies = self._trained_copies(info)
            if copies:
                st.snapshot = _versions(info.module)
                st.others = {id(c): _versions(c.module) for c in copies}
            return
        self._judge(info, st)

    def _trained_copies(self, info: ModelInfo) -> list[ModelInfo]:
        return trained_copies(self.s, info)

    def _judge(self, info: ModelInfo, st: _Eval) -> None:
        if _versions(info.module) != st.snapshot:
            st.snapshot = None  # it was updated (loaded, synced, an EMA step): start again
            return
        moved = [m for m in self._trained_copies(info)
                 if id(m) in st.others and _versions(m.module) != st.others[id(m)]]
        if not moved:
            return
        names = first_names([m.name for m in moved])
        self.s.report(
            "eval-model-stale",
            f"{info.name} is evaluated again with the very weights it had at its first evaluation, although "
            f"{names} (the same architecture, held by an optimizer) trained in between and no optimizer holds "
            f"{info.name}'s parameters: the evaluation scores a copy that training never updates (made once with "
            "copy.deepcopy, an EMA whose update is never called, the wrong variable), so every validation "
            "metric, early stopping and model selection measure the initial weights.",
            fix=f"evaluate the trained model ({moved[0].name}), or update the copy before evaluating it "
            "(copy.load_state_dict(model.state_dict()), ema.update(model) after each step).",
            where=f"{info.name} forward, evaluation", key=info.name,
        )
