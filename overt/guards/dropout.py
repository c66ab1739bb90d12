"""Guards on dropout: functional dropout that ignores the model's mode (slug ``dropout-always-on``)
and a dropout that drops most of its inputs in training (slug ``dropout-drops-most``).

``F.dropout(x, p)`` defaults to ``training=True``: called in ``forward`` without
``training=self.training`` (or with ``training=True`` written out) it keeps dropping units after
``model.eval()``.  The check looks only at evaluation forwards (the model in eval mode, under
no_grad/inference_mode or not): for the first few of each model, ``torch.nn.functional``'s
dropout functions are swapped for a recorder until the forward ends.  A call with
``training=True`` and ``p > 0`` inside an eval-mode forward is the bug (``nn.Dropout`` modules
pass ``self.training``, False there).

``dropout-drops-most``: ``p`` is the probability of zeroing a unit.  A keep probability passed as
``p`` (TensorFlow's ``keep_prob``, a config's ``dropout_keep_prob=0.9`` or 1) drops most or all of the
activations.  On the first :data:`TRAIN_LOOKS` checked training forwards of each model, its dropout
layers' ``p`` is read (a host attribute) and the functional dropouts are recorded as above; a
dropout with ``p >`` :data:`MOST` that is active in training is reported (a warning; an error at
``p = 1``, which zeroes everything).  No device value is read.
"""

from __future__ import annotations

import functools
import inspect
import re
import sys
from typing import TYPE_CHECKING, Any

import torch.nn.functional as F

from overt.catalog import Severity
from overt.guards.check import Check
from overt.guards.swapped import Swapped, compiling
from overt.guards.watched import _BN
from overt.guards.where import class_location, from_torch, is_user_file, short_location, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

#: the functional dropouts whose ``training`` argument defaults to True
FUNCTIONS = ("dropout", "dropout1d", "dropout2d", "dropout3d", "alpha_dropout", "feature_alpha_dropout")
#: eval-mode forwards looked at per model
LOOKS = 3
#: checked training forwards looked at per model (dropout-drops-most)
TRAIN_LOOKS = 2
#: a dropout whose p is above this drops most of its inputs
MOST = 0.7


def _training_arg(args: tuple, kwargs: dict) -> tuple[float, bool]:
    """(p, training) of a functional dropout call (its signature: input, p=0.5, training=True, inplace=False)."""
    p = kwargs.get("p", args[1] if len(args) > 1 else 0.5)
    training = kwargs.get("training", args[2] if len(args) > 2 else True)
    return float(p), bool(training)


def _p(m: Any) -> float:
    p = getattr(m, "p", 0.0)
    return float(p) if isinstance(p, (int, float)) else 0.0


def _built_at(info: ModelInfo, layer: Any) -> str | None:
    """``file.py:LINE`` of the ``self.NAME = ...`` line in the user's class that holds ``layer`` as
    its attribute NAME (where the dropout was built), else where that class is defined, else None."""
    for m in info.module.modules():
        for attr, child in m.named_children():
            if child is not layer:
                continue
            try:
                path = inspect.getsourcefile(type(m))
                lines, start = inspect.getsourcelines(type(m))
            except (OSError, TypeError):
                return None
            if not path or not is_user_file(path):
                return None
            pattern = re.compile(rf"\s*self\.{re.escape(attr)}\s*(:[^=]*)?=")
            for i, line in enumerate(lines):
                if pattern.match(line):
                    return short_location(path, start + i)
            return class_location(m)
    return None


def _recorder(orig: Any, owner: Any = None, name: str = "") -> Any:
    @functools.wraps(orig)
    def dropout(*args: Any, **kwargs: Any) -> Any:
        if compiling():  # traced by torch.compile: PyTorch's own call, no graph break
            return orig(*args, **kwargs)
        try:
            p, training = _training_arg(args, kwargs)
            if training and p > 0 and not from_torch(sys._getframe(1)):  # nn.Dropout's own call: not here
                loc = user_location(2) or ""
                for check in RECORDER.listening:
                    check.calls.append((p, loc))
        except Exception:  # noqa: BLE001  never break the user's forward over a check
            pass
        return orig(*args, **kwargs)

    return dropout


#: the functional dropouts swapped for one recorder each while any session's look is under way (two
#: sessions at once -- the engine's default guards and a user's GuardCallback -- used to wrap each
#: other's wrappers and restore them out of order, leaving wrappers behind on every run)
RECORDER = Swapped([(F, name) for name in FUNCTIONS], _recorder)


class DropoutChecks(Check):
    name = "dropout"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looks: dict[int, int] = {}  # id(ModelInfo) -> eval forwards looked at
        self.train_looks: dict[int, int] = {}  # id(ModelInfo) -> checked training forwards looked at
        self.training_look = False  # the look under way is of a training forward
        self.recording = False  # a look is under way (the functional dropouts are recorded)
        self.calls: list[tuple[float, str]] = []  # (p, where) of dropout calls with training=True
        self.current: ModelInfo | None = None
        self.handle: Any = None
        self.stale: list[Any] = []  # hooks of forwards that raised, removed at the next look

    def on_eval_forward(self, info: ModelInfo, args: tuple) -> None:
        self._look(info)

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        self._look(info)

    def eval_looks_left(self, info: ModelInfo) -> bool:
        return bool(info.dropbn) and self.looks.get(id(info), 0) < LOOKS \
            and not self.s.reporter.has("dropout-always-on", info.name)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        n = self.train_looks.get(id(info), 0)
        if n >= TRAIN_LOOKS or self.current is not None:
            return
        self.train_looks[id(info)] = n + 1
        layers = [m for m in info.dropbn if not isinstance(m, _BN) and m.training and _p(m) > MOST]
        for m in layers:
            self._report_most(info, _p(m), info.label(m), layer=m)
        self._start(info, training=True)

    def _look(self, info: ModelInfo) -> None:
        if info.module.training or self.current is not None or self.s.reporter.has("dropout-always-on", info.name):
            return
        n = self.looks.get(id(info), 0)
        if n >= LOOKS:
            return
        self.looks[id(info)] = n + 1
        self._start(info, training=False)

    def _start(self, info: ModelInfo, training: bool) -> None:
        if self.recording:  # a look whose forward never ended (an exception before its hook)
            self._restore()
        while self.stale:
            self.stale.pop().remove()
        self.current, self.calls, self.training_look = info, [], training
        RECORDER.listen(self)
        self.recording = True
        self.handle = info.module.register_forward_hook(self._done, always_call=True)

    def _restore(self) -> None:
        if self.recording:
            RECORDER.stop(self)
            self.recording = False
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
        if self.training_look:
            for p, loc in calls:
                if p > MOST:
                    self._report_most(info, p, f"F.dropout at {loc}" if loc else f"{info.name} forward")
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

    def _report_most(self, info: ModelInfo, p: float, where: str, layer: Any = None) -> None:
        what = f"{type(layer).__name__}(p={p:g})" if layer is not None else f"functional dropout with p={p:g}"
        at = ""
        if layer is not None:
            loc = _built_at(info, layer)
            at = f" (built at {loc})" if loc else ""
        effect = ("zeroes every activation in training: nothing before it receives a gradient and the layers after "
                  "it see only zeros" if p >= 1 else
                  f"zeroes {p:.0%} of the activations in training, so the layers before it barely learn")
        self.s.report(
            "dropout-drops-most",
            f"{what} in {info.name} {effect}. p is the probability of dropping a unit, not of keeping it: a keep "
            f"probability passed as p (keep_prob={p:g}) does exactly this.",
            fix=f"pass the drop probability, p = 1 - keep_prob ({1 - p:g} here); if dropping {p:.0%} is meant, "
            f"{self.s.options.silence('dropout-drops-most')}.",
            where=f"{where}{at}", key=f"{info.name}:{where}", severity=Severity.ERROR if p >= 1 else None,
        )

    def remove_hooks(self) -> None:
        self.current = None
        self._restore()
        while self.stale:
            self.stale.pop().remove()
