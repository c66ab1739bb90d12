"""Guard on functional dropout that ignores the model's mode (slug ``dropout-always-on``).

``F.dropout(x, p)`` defaults to ``training=True``: called in ``forward`` without
``training=self.training`` (or with ``training=True`` written out) it keeps dropping units after
``model.eval()``.  The check looks only at evaluation forwards (the model in eval mode, under
no_grad/inference_mode or not): for the first few of each model, ``torch.nn.functional``'s
dropout functions are swapped for a recorder until the forward ends.  A call with
``training=True`` and ``p > 0`` inside an eval-mode forward is the bug (``nn.Dropout`` modules
pass ``self.training``, False there).  Training steps are never touched.
"""

from __future__ import annotations

import functools
import sys
from typing import TYPE_CHECKING, Any

import torch.nn.functional as F

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

#: the functional dropouts whose ``training`` argument defaults to True
FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
#: eval-mode forwards looked at per model
LOOKS = 3


def _training_arg(args: tuple, kwargs: dict) -> tuple[float, bool]:
    """(p, training) of a functional dropout call (its signature: input, p=0.5, training=True, inplace=False)."""
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", args[2] if len(args) > 2 else True)
    return float(p), bool(training)


class DropoutChecks(Check):
    name = "dropout"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}  # id(ModelInfo) -> eval forwards looked at
        self.saved: dict[str, Any] = {}  # function name -> PyTorch's own, while a look is under way
        self.calls: list[tuple[float, str]] = []  # (p, where) of dropout calls with training=True
        self.current: ModelInfo | None = None
        self.handle: Any = None
        self.stale: list[Any] = []  # hooks of forwards that raised, removed at the next look

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._look(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._look(info)

    def _look(self, info: ModelInfo) -> None:
        while self.stale:
            self.stale.pop().remove()
        if info.module.training or self.current is not None or self.s.reporter.has("dropout-always-on", info.name):
            return
        n = self.looks.get(id(info), 0)
        if n >= LOOKS:
            return
        self.looks[id(info)] = n + 1
        self.current, self.calls = info, []
        for name in FUNCTIONS:
            orig = getattr(F, name, None)
            if orig is not None:
                self.saved[name] = orig
                setattr(F, name, self._recorder(orig))
        self.handle = info.module.register_forward_hook(self._done, always_call=True)

    def _recorder(self, orig: Any) -> Any:
        @functools.wraps(orig)
        def dropout(*args: Any, **kwargs: Any) -> Any:
            try:
                p, training = _training_arg(args, kwargs)
                if training and p > 0:
                    self.calls.append((p, user_location(2) or ""))
            except Exception:  # noqa: BLE001  never break the user's forward over a check
                pass
            return orig(*args, **kwargs)

        return dropout

    def _restore(self) -> None:
        for name, orig in self.saved.items():
            setattr(F, name, orig)
        self.saved = {}
        if self.handle is not None:
            if sys.exc_info()[1] is not None:
                # a forward that raised: PyTorch iterates the live hook dict, so removing a hook
                # now would cut the other hooks off; removed at the next look or at the end
                self.stale.append(self.handle)
            else:
                self.handle.remove()
            self.handle = None

    def _done(self, module: Any, args: Any, output: Any) -> None:
        info, calls = self.current, self.calls
        self.current, self.calls = None, []
        self._restore()
        if info is None or not calls:
            return
        p, loc = calls[0]
        self.s.report(
            "dropout-always-on",
            f"{info.name} is in eval mode, yet its forward applied functional dropout with training=True "
            f"(p={p:g}, {len(calls)} call(s) in one forward): F.dropout's training argument defaults to True, so "
            "model.eval() does not reach it and validation, inference and every metric stay randomly noisy.",
            fix="F.dropout(x, p, training=self.training), or an nn.Dropout(p) layer created in __init__.",
            where=f"{info.name} forward, dropout at {loc}" if loc else info.name, key=info.name,
        )

    def remove_hooks(self) -> None:
        self.current = None
        self._restore()
        while self.stale:
            self.stale.pop().remove()
