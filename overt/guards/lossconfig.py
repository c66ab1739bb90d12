"""Guard on a loss module whose per-class configuration is rebound to one batch's per-sample values
(slug ``loss-config-overwritten``; issue 33, session 50, family datalabels15).

An invariant of every correct loss: what a loss module was configured with -- class weights, a focal
``alpha``, per-class margins or priors, tensors it holds that are not parameters -- describes the classes,
not a batch, so a call of the loss reads it and leaves it one value per class.  A forward that assigns a
batch's values back to that attribute (``self.alpha = self.alpha.gather(0, labels)``, yatengLG/Focal-Loss-
Pytorch#5, [w327](wild.md)) keeps training with no error: from the next call on the weights are looked up,
by class index, in the first batch's per-sample values, so the class weighting becomes whatever the first
samples happened to be (and a larger batch later raises an index error).

Observed at runtime on the values, whatever the loss's code looks like. On a checked step, from the end of a
watched model's training forward until the optimizer's step or a watched model's next forward (at most
:data:`MAX_HOOK_CALLS` module calls), a global module forward pre-hook notes, for each call of a module whose
class ``forward`` is written in the user's files and that is not part of a watched model, which plain tensors
and buffers the module holds (object and shape: host metadata only); the matching forward hook compares them
after the call. Reported when the call returned one number with a gradient (a loss), was given a scored input
with a gradient of ``N`` rows and ``C >= 2`` columns (``(N, C, ...)``), and an attribute that held exactly ``C``
values or ``C`` rows (one per class of that input: weights, centres) at the module's first looked call now holds
a different tensor whose first size is ``N`` (one per sample) or that holds one value per scored position,
``N != C``, and every value of the new tensor is one of the old tensor's values (the configuration spread over the
batch by label, read with the checked step's deferred reads: a record of another quantity kept in an attribute
is not that). The line named is the method's assignment of that attribute.

Silent where the premise cannot be proven: a batch with as many rows as classes (per-class and per-sample are not
told apart), the configuration repeated on every row (``expand(N, C)``: each row still per class), a state that
keeps its shape (an EMA centre, a running mean, a moved or re-cast weight), a cache rebuilt for a new batch size
(it did not hold one value per class), attributes that were not tensors (lists, numbers), torch's own loss modules
(configured in ``__init__``, never written in ``forward``), losses that are plain functions, and modules of a
watched model. Nothing runs on unchecked steps; on a checked step only host metadata is read, and the one value
comparison of a candidate rides on the step's deferred reads.
"""

from __future__ import annotations

import dis
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

MAX_HOOK_CALLS = 200  # module calls looked at in one window
MAX_WINDOWS = 60  # windows opened in one run
FIND_WINDOWS = 6  # windows that found no loss module of the user's before giving up


def _a_loss(value: Any) -> bool:
    """One floating number with a gradient."""
    return isinstance(value, torch.Tensor) and value.dim() == 0 and value.requires_grad and value.is_floating_point()


def _user_forward(kind: type) -> bool:
    code = getattr(getattr(kind, "forward", None), "__code__", None)
    return code is not None and is_user_file(code.co_filename)


def _tensors(module: Any) -> dict[str, torch.Tensor]:
    """The plain tensors and buffers ``module`` holds, by attribute name (parameters left out)."""
    held = {k: v for k, v in vars(module).items()
            if isinstance(v, torch.Tensor) and not isinstance(v, torch.nn.Parameter)}
    for k, v in getattr(module, "_buffers", {}).items():
        if isinstance(v, torch.Tensor):
            held[k] = v
    return held


def _scored(args: tuple, kwargs: dict) -> torch.Tensor | None:
    """The one floating argument with a gradient of two or more dimensions (None: none, or several)."""
    found = [v for v in list(args) + list(kwargs.values())
             if isinstance(v, torch.Tensor) and v.requires_grad and v.is_floating_point() and v.dim() >= 2]
    return found[0] if len(found) == 1 else None


def store_site(kind: type, name: str) -> str | None:
    """The user's file:line where a method of ``kind`` (not ``__init__``) assigns ``self.<name>``."""
    for klass in kind.__mro__:
        for attr, fn in vars(klass).items():
            code = getattr(fn, "__code__", None)
            if attr == "__init__" or code is None or not is_user_file(code.co_filename):
                continue
            line = code.co_firstlineno
            for ins in dis.get_instructions(code):
                if ins.starts_line:
                    line = ins.starts_line if isinstance(ins.starts_line, int) else (ins.line_number or line)
                elif getattr(ins, "line_number", None):
                    line = ins.line_number
                if ins.opname == "STORE_ATTR" and ins.argval == name:
                    return short_location(code.co_filename, line)
    return None


class LossConfigChecks(Check):
    name = "lossconfig"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.pre: Any = None
        self.post: Any = None
        self.calls = 0
        self.windows = 0
        self.found = False  # a loss module of the user's was seen in some window
        self.over = False
        self.user_kinds: dict[type, bool] = {}
        self.user_modules: set[int] = set()  # ids of the watched models' modules
        self.models_seen: set[int] = set()
        self.pending: dict[int, dict[str, tuple[torch.Tensor, tuple]]] = {}
        self.done: set[tuple[type, str]] = set()
        self.first: dict[int, frozenset[str]] = {}  # loss module id -> the tensors it held at its first looked call
        self.rows: dict[int, set[int]] = {}  # loss module id -> the batch rows of its looked calls

    # -- the window: a checked training forward's end until the step ---------------------------------------
    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if self.over or failed or self.pre is not None or not self.s.armed:
            return
        if not info.module.training or not torch.is_grad_enabled() or torch.compiler.is_compiling():
            return
        if id(info) not in self.models_seen:
            self.models_seen.add(id(info))
            self.user_modules.update(id(m) for m in info.module.modules())
        self.windows += 1
        if self.windows > MAX_WINDOWS or (self.windows > FIND_WINDOWS and not self.found):
            self.over = True
            return
        self.calls = 0
        self.pre = torch.nn.modules.module.register_module_forward_pre_hook(self._before)
        self.post = torch.nn.modules.module.register_module_forward_hook(self._after, with_kwargs=True)

    def _close(self) -> None:
        for h in (self.pre, self.post):
            if h is not None:
                h.remove()
        self.pre = self.post = None
        self.pending = {}

    def _mine(self, module: Any) -> bool:
        kind = type(module)
        mine = self.user_kinds.get(kind)
        if mine is None:
            mine = self.user_kinds[kind] = _user_forward(kind)
        return mine and id(module) not in self.user_modules

    def _before(self, module: Any, args: tuple) -> None:
        try:
            self.calls += 1
            if self.calls > MAX_HOOK_CALLS or id(module) in self.s.models:  # budget spent, or the next forward
                self._close()
                return
            if self._mine(module):
                self.pending[id(module)] = {k: (v, tuple(v.shape)) for k, v in _tensors(module).items()}
        except Exception:  # noqa: BLE001  never break training: this window is given up
            self._close()

    def _after(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        try:
            held = self.pending.pop(id(module), None)
            if held is None or not _a_loss(output):
                return
            self.found = True
            x = _scored(args, kwargs)
            if x is None:
                return
            rows, classes = x.shape[0], x.shape[1]
            first = self.first.setdefault(id(module), frozenset(held))
            seen = self.rows.setdefault(id(module), set())
            seen.add(rows)
            if rows == classes or classes < 2:
                return
            now = _tensors(module)
            for name, (old, shape) in held.items():
                new = now.get(name)
                if new is None or new is old or tuple(new.shape) == shape or (type(module), name) in self.done:
                    continue
                if name not in first or classes in seen:
                    continue  # set by a call (a cache, a record of the last batch), or a batch of C rows was seen
                per_sample = new.dim() >= 1 and (new.shape[0] == rows or new.numel() == x.numel() // classes)
                per_class = old.numel() == classes or (len(shape) >= 2 and shape[0] == classes)
                if tuple(new.shape[1:]) in (shape, tuple(k for k in shape if k != 1)):
                    continue  # the whole configuration repeated on every row (an expand): still one value per class
                if per_class and shape[:1] != (rows,) and per_sample and new.device == old.device:
                    self.done.add((type(module), name))
                    with torch.no_grad():
                        drawn = torch.isin(new.detach().reshape(-1), old.detach().reshape(-1)).all().float()
                    args = (module, name, shape, tuple(new.shape), rows, classes)
                    self.s.defer(drawn.reshape(1), lambda v, a=args: v[0] >= 1 and self._report(*a))
        except Exception:  # noqa: BLE001  never break training: this call is given up
            return

    def _report(self, module: Any, name: str, old: tuple, new: tuple, rows: int, classes: int) -> None:
        kind = type(module)
        code = kind.forward.__code__
        fwd = short_location(code.co_filename, code.co_firstlineno)
        where = store_site(kind, name) or fwd
        cls = kind.__name__
        unit = "rows" if len(old) >= 2 and old[0] == classes else "values"
        self.s.report(
            "loss-config-overwritten",
            f"the loss {cls} (forward at {fwd}) rebinds its attribute self.{name} at {where}: before this call it "
            f"held {classes} {unit} (shape {list(old)}), one per class of the {classes}-column input it scores; "
            f"after the call it holds a tensor of shape {list(new)}, one per sample of this batch of {rows}, made "
            f"of its configured values. "
            f"A loss's configuration (class weights, alpha, margins) describes the classes, not a batch: from the "
            f"next call on, {cls} looks its values up by class index in this batch's per-sample ones, so the "
            f"weighting it was configured with is lost (and a later batch with more rows than this one raises an "
            f"index error).",
            where,
            fix=f"keep the per-batch values in a local variable ({name} = self.{name}.gather(0, target) or "
                f"self.{name}[target]) and leave self.{name} as configured in __init__",
            key=f"{cls}.{name}")

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self._close()

    def remove_hooks(self) -> None:
        self._close()
