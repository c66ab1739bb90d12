"""Guard on a loss of binary labels whose gradient does not move the two labels apart
(slug ``loss-rises-toward-target``; issue 33, branch lossmono).

An invariant of every correct loss of binary labels: it falls as a prediction moves toward its label, so its
descent direction moves the outputs of the two labels' samples apart -- one label's up, the other's down.
A hand-written loss that breaks it (a focal term whose modulating factor is inverted, a sign lost in one
label's term, a term that vanishes as the output runs to the wrong side) is minimised by putting samples on
the wrong side of the boundary, and training follows it with no error while the loss falls.

Observed at runtime on the values, whatever the loss's code looks like.  On a checked step, between the end of
a watched model's training forward and the optimizer's step, a global module forward hook looks for the call of
a loss module written in the user's files (not torch's) that is given a tensor of that forward's output (or a
view of it) and a target of the same shape with no gradient, holding only 0 and 1, and returns one number with
a gradient.  Before the step that call is repeated once on a detached copy of the output (the module's buffers
and the RNG state put back after) and differentiated with respect to it.  Reported when, on two checked calls
of one loss, the samples of one label that sit on the wrong side of the boundary (a negative whose output is
above 0.5, a positive whose output is below 0: the wrong side whether the outputs are logits or probabilities),
at least ``MIN_FAR`` of them with a gradient, are pushed further to the wrong side by the descent direction (at
least ``MOST`` of them), while the other label's samples with a gradient (at least ``MIN_OTHER``) are pushed the
same way.

Silent where the premise cannot be proven: one label in the batch (a GAN's generator scored with the real label,
a discriminator's separate real and fake calls), labels that are moved apart in the inverted orientation (a
distance trained with similar/dissimilar labels: the two labels still go opposite ways), zero gradients (a
margin already met, saturated outputs), targets that are not 0/1 (soft labels, regression values, whose space
relative to the output cannot be proven), class-index targets (a loss of an inverted orientation, such as one
over distances, is not told apart from an inverted loss there), losses that are plain functions or torch's
own modules (the module call is what is seen), calls with a tensor argument that requires a gradient beside
the output.

Bounded work: nothing on unchecked steps; on a checked step the window closes when the loss is found, when
``backward()`` starts, or after ``MAX_EVENTS`` profile events or ``MAX_HOOK_CALLS`` module calls; a run opens no
window after ``FIND_WINDOWS`` windows found no loss of the user's, nor after ``MAX_WINDOWS`` in all.  No profile
function is installed while another one is (a profiler, a benchmark's counter).
"""

from __future__ import annotations

import gc
import sys
import types
import weakref
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.aside import user_code
from overt.guards.check import Check
from overt.guards.putback import restore_buffers, save_buffers
from overt.guards.watched import output_tensors, storage_ptr
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

MIN_FAR = 8  # wrong-side samples of one label with a gradient
MIN_OTHER = 4  # samples of the other label with a gradient
MOST = 0.9  # share of them pushed the way that breaks the premise
TIMES = 2  # checked calls of one loss that break it before a report
LOOKS = 8  # checked calls probed per loss
MAX_HOOK_CALLS = 256  # module calls looked at per window (the window closes after)
TINY = 1e-12  # a gradient entry at or below this (relative to the largest) counts as none


FIND_WINDOWS = 3  # windows in which a loss of the user's must be found, or none is looked for again
MAX_WINDOWS = 24  # windows in a run
MAX_EVENTS = 4000  # profile events looked at per window (the window closes after)
_BACKWARD = frozenset(f.__code__ for f in (torch.Tensor.backward, torch.autograd.backward))
_FUNCS: dict[Any, Any] = {}  # code object -> its one function object (None: not one)


def _a_loss(value: Any) -> bool:
    """One floating number with a gradient."""
    return isinstance(value, torch.Tensor) and value.dim() == 0 and value.requires_grad and value.is_floating_point()


class _Call:
    __slots__ = ("module", "fn", "args", "kwargs", "pos", "site", "label")

    def __init__(self, module: Any, fn: Any, args: tuple, kwargs: dict, pos: int | str, site: str, label: str):
        self.module, self.fn, self.args, self.kwargs, self.pos = module, fn, args, kwargs, pos
        self.site, self.label = site, label


def _function_of(code: Any) -> Any:
    """The one function object whose code is ``code`` (None: none, or several, as closures of one ``def``)."""
    if code in _FUNCS:
        return _FUNCS[code]
    found = [f for f in gc.get_referrers(code) if isinstance(f, types.FunctionType) and f.__code__ is code]
    fn = found[0] if len(found) == 1 else None
    _FUNCS[code] = fn
    return fn


def _forward_site(module: Any) -> str | None:
    """The user's file:line of ``module``'s class ``forward`` (None: torch's own or not a user file)."""
    fwd = getattr(type(module), "forward", None)
    code = getattr(fwd, "__code__", None)
    if code is None or not is_user_file(code.co_filename):
        return None
    return short_location(code.co_filename, code.co_firstlineno)


def _binary_pair(pred: torch.Tensor, target: Any) -> bool:
    """Whether ``target`` is a same-shaped tensor of labels for ``pred`` (beyond trailing sizes of 1), with no
    gradient; its values are checked on the device later."""
    if not isinstance(target, torch.Tensor) or target.requires_grad or target.is_complex():
        return False
    if target.dtype not in (torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64) and \
            not target.is_floating_point():
        return False
    a = [s for s in pred.shape]
    b = [s for s in target.shape]
    while a and a[-1] == 1:
        a.pop()
    while b and b[-1] == 1:
        b.pop()
    return bool(a) and a == b and pred.numel() == target.numel() and pred.device == target.device


class LossDirectionChecks(Check):
    name = "lossdir"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.outs: list[tuple[weakref.ref, int | None]] = []  # this step's training outputs
        self.handle: Any = None
        self.profiling = False
        self.hook_calls = 0
        self.events = 0
        self.pending: dict[int, tuple[Any, tuple, dict, int] | None] = {}  # frame id -> a candidate call
        self.call: _Call | None = None
        self.looks: dict[str, int] = {}  # loss site -> checked calls probed
        self.broken: dict[str, int] = {}  # loss site -> checked calls that broke the premise
        self.done: set[str] = set()
        self.busy = False
        self.user_modules: set[int] = set()  # ids of the watched models' modules
        self.codes: dict[Any, bool] = {}  # code object -> whether its calls are looked at
        self.models_seen: set[int] = set()
        self.windows = 0  # windows opened (checked training forwards looked after)
        self.over = False  # no more windows in this run
        self.sites: dict[type, str | None] = {}  # a module class -> its forward's user location (None: not a user's)

    # -- the window: a checked training forward's end until the step ------------------------------------------
    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if self.over or failed or output is None or self.busy or self.call is not None or not self.s.armed:
            return
        if not info.module.training or not torch.is_grad_enabled():
            return
        outs = [t for t in output_tensors(output) if t.requires_grad and t.is_floating_point() and t.numel()]
        if not outs:
            return
        if id(info) not in self.models_seen:
            self.models_seen.add(id(info))
            self.user_modules.update(id(m) for m in info.module.modules())
        self.outs = [(weakref.ref(t), storage_ptr(t)) for t in outs][:8]
        self.windows += 1
        if self.windows > MAX_WINDOWS or (self.windows > FIND_WINDOWS and not self.looks):
            self.over = True  # no loss of the user's in the first windows, or enough looks: nothing more to see
            return
        self._open()

    def _open(self) -> None:
        if self.handle is None:
            self.hook_calls = 0
            self.handle = torch.nn.modules.module.register_module_forward_hook(self._seen, with_kwargs=True)
        if not self.profiling and sys.getprofile() is None and not torch.compiler.is_compiling():
            self.events = 0
            self.pending = {}
            sys.setprofile(self._profile)
            self.profiling = True

    def _close(self) -> None:
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        if self.profiling:
            if sys.getprofile() == self._profile:
                sys.setprofile(None)
            self.profiling = False
            self.pending = {}

    # -- a loss module's call: a global forward hook --------------------------------------------------------
    def _seen(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        try:
            self._look(module, args, kwargs, output)
        except Exception:  # noqa: BLE001  never break training: this look is given up
            self._close()

    def _look(self, module: Any, args: tuple, kwargs: dict, output: Any) -> None:
        self.hook_calls += 1
        if self.hook_calls > MAX_HOOK_CALLS or self.busy:
            self._close()
            return
        kind = type(module)
        site = self.sites.get(kind, "")
        if site == "":
            site = self.sites[kind] = _forward_site(module)
        if site is None or id(module) in self.user_modules or self.call is not None or not _a_loss(output) \
                or not self._wanted(site):
            return
        pos = self._candidate(list(enumerate(args)) + list(kwargs.items()))
        if pos is None:
            return
        self.call = _Call(module, None, tuple(args), dict(kwargs), pos, site, type(module).__name__)
        self._close()

    # -- a loss function's call: a profile function while the window is open ----------------------------------
    def _profile(self, frame: Any, event: str, arg: Any) -> None:
        if event != "call" and event != "return":
            return
        try:
            self.events += 1
            if self.events > MAX_EVENTS or self.call is not None:
                self._close()
                return
            if event == "call":
                if frame.f_code in _BACKWARD:
                    self._close()  # the loss is computed: nothing more to look for before the step
                    return
                self._enter(frame)
            elif id(frame) in self.pending:
                self._leave(frame, arg)
        except Exception:  # noqa: BLE001  never break training: the window is given up
            self._close()

    def _enter(self, frame: Any) -> None:
        code = frame.f_code
        ok = self.codes.get(code)
        if ok is None:
            ok = (is_user_file(code.co_filename) and code.co_argcount + code.co_kwonlyargcount >= 2
                  and not code.co_flags & 0x0C)  # no *args / **kwargs
            self.codes[code] = ok
        if not ok:
            return
        local = frame.f_locals
        n = code.co_argcount
        names = code.co_varnames[:n + code.co_kwonlyargcount]
        values = [local.get(k) for k in names]
        pos = self._candidate(list(zip(names, values)))
        if pos is None:
            return
        if code.co_name == "forward" and isinstance(local.get("self"), torch.nn.Module):
            self.pending[id(frame)] = None  # a loss module's forward: the forward hook takes its call
            return
        self.pending[id(frame)] = (code, tuple(values[:n]), dict(zip(names[n:], values[n:])), names.index(pos))

    def _leave(self, frame: Any, value: Any) -> None:
        entry = self.pending.pop(id(frame))
        if entry is None or self.pending or not _a_loss(value):
            return  # an inner call of another candidate (the outermost one is the loss), or no loss
        code, args, kwargs, pos = entry
        site = short_location(code.co_filename, code.co_firstlineno)
        if not self._wanted(site):
            return
        fn = _function_of(code)
        if fn is None:
            return
        self.call = _Call(None, fn, args, kwargs, pos, site, code.co_name)
        self._close()

    # -- what a candidate is ------------------------------------------------------------------------------
    def _wanted(self, site: str) -> bool:
        return site not in self.done and self.looks.get(site, 0) < LOOKS

    def _candidate(self, named: list[tuple[Any, Any]]) -> int | str | None:
        """The key of the one argument that is this step's model output, when another is a same-shaped
        target with no gradient and no other argument carries a gradient (None otherwise)."""
        tensors = [(k, v) for k, v in named if isinstance(v, torch.Tensor)]
        preds = [(k, v) for k, v in tensors if self._is_output(v)]
        if len(preds) != 1 or any(v.requires_grad for k, v in tensors if k != preds[0][0]):
            return None
        pos, pred = preds[0]
        if sum(_binary_pair(pred, v) for k, v in tensors if k != pos) != 1:
            return None  # no target, or two same-shaped tensors (a target and a mask or weights): which is which?
        return pos

    def _is_output(self, t: torch.Tensor) -> bool:
        if not t.requires_grad or not t.is_floating_point():
            return False
        ptr = storage_ptr(t)
        for ref, optr in self.outs:
            out = ref()
            if out is None:
                continue
            if t is out or (ptr is not None and ptr == optr and t.numel() == out.numel()):
                return True
        return False

    # -- the probe -----------------------------------------------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self._close()
        call, self.call = self.call, None
        self.outs = []
        if call is None or call.site in self.done:
            return
        self.looks[call.site] = self.looks.get(call.site, 0) + 1
        counts = self._probe(call)
        if counts is not None:
            self.s.defer(counts, lambda v, c=call: self._judge(c, v))

    def _probe(self, call: _Call) -> torch.Tensor | None:
        pred = call.args[call.pos] if isinstance(call.pos, int) else call.kwargs[call.pos]
        target = None
        for k, v in list(enumerate(call.args)) + list(call.kwargs.items()):
            if k != call.pos and _binary_pair(pred, v):
                target = v
                break
        if target is None:
            return None
        x = pred.detach().clone().requires_grad_(True)
        args = tuple(x if i == call.pos else a for i, a in enumerate(call.args))
        kwargs = {k: (x if k == call.pos else v) for k, v in call.kwargs.items()}
        owners = [call.module] if call.module is not None else \
            [a for a in args if isinstance(a, torch.nn.Module)]
        saved = save_buffers(owners)
        devices = [x.device.index or 0] if x.device.type == "cuda" else []
        self.busy = True
        try:
            with torch.random.fork_rng(devices=devices), torch.enable_grad(), user_code():
                fn = call.module if call.module is not None else call.fn
                loss = fn(*args, **kwargs)
                if not _a_loss(loss):
                    return None
                (g,) = torch.autograd.grad(loss, x, allow_unused=True)
        except Exception:  # noqa: BLE001  a loss that cannot be called again: nothing is concluded
            return None
        finally:
            self.busy = False
            restore_buffers(saved)
        if g is None:
            return None
        with torch.no_grad():
            p = x.detach().reshape(-1).float()
            g = g.detach().reshape(-1).float()
            t = target.detach().reshape(-1).float()
            labels = ((t == 0) | (t == 1)).all()
            big = g.abs() > TINY * g.abs().amax().clamp(min=1e-30)
            neg, pos = (t == 0) & big, (t == 1) & big
            up, down = g < 0, g > 0  # the descent direction (-g) raises / lowers the output
            far_neg = neg & (p > 0.5)
            far_pos = pos & (p < 0)
            row = [labels.float(),
                   far_neg.sum(), (far_neg & up).sum(), pos.sum(), (pos & up).sum(),
                   far_pos.sum(), (far_pos & down).sum(), neg.sum(), (neg & down).sum()]
            return torch.stack([r.float() for r in row])

    def _judge(self, call: _Call, v: list[float]) -> None:
        labels, far_neg, far_neg_up, pos, pos_up, far_pos, far_pos_down, neg, neg_down = v
        if labels < 1:
            self.done.add(call.site)  # not 0/1 labels: the premise is not this loss's
            return
        side = None
        if far_neg >= MIN_FAR and far_neg_up >= MOST * far_neg and pos >= MIN_OTHER and pos_up >= MOST * pos:
            side = ("negative", int(far_neg_up), int(far_neg), "above 0.5", "up", int(pos_up), int(pos), "positive")
        elif far_pos >= MIN_FAR and far_pos_down >= MOST * far_pos and neg >= MIN_OTHER and neg_down >= MOST * neg:
            side = ("positive", int(far_pos_down), int(far_pos), "below 0", "down", int(neg_down), int(neg),
                    "negative")
        if side is None:
            return
        self.broken[call.site] = self.broken.get(call.site, 0) + 1
        if self.broken[call.site] < TIMES:
            return
        self.done.add(call.site)
        label, n_away, n_far, where, way, n_other, n_all, other = side
        cls = call.label
        fwd = "forward " if call.module is not None else ""
        what = f"{cls}.forward" if call.module is not None else cls
        self.s.report(
            "loss-rises-toward-target",
            f"the loss {cls} ({fwd}at {call.site}) falls as predictions move AWAY from their binary labels: "
            f"called again on this step's outputs, its gradient pushes {n_away} of the {n_far} {label} samples whose "
            f"output is {where} (the wrong side of the boundary) further {way}, and {n_other} of the {n_all} "
            f"{other} samples {way} as well, so minimising it does not separate the labels. A loss of binary "
            f"labels must fall as each prediction moves toward its label's side; one term of this one (a "
            f"modulating factor, a sign, a log of the wrong probability) rewards the wrong side, and the model "
            f"learns to score every sample alike while the loss falls.",
            call.site,
            fix=f"check each label's term of {what}: the {label} term must grow as the output moves to the wrong side"
                f" (a focal loss's negatives are modulated by p**gamma, its positives by (1 - p)**gamma); "
                f"compare it with torchvision.ops.sigmoid_focal_loss or F.binary_cross_entropy_with_logits",
            key=call.site)

    def remove_hooks(self) -> None:
        self._close()
        self.call = None
        self.outs = []
