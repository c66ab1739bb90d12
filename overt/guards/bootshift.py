"""A bootstrapped target written inline discounts the next value (slug ``targets-off-recursion``; issue 33,
session 52, branch rl17).

The premise: a program that regresses a prediction onto a target bootstrapped from a network's value of the next
state (``y = r + gamma * (1 - done) * V(s')``, a DQN/DDPG/SAC/NAF critic target, wherever and however it is
written) makes the target move with the next value by the discount: raising every next value by ``d`` raises each
target by ``gamma * c_t * d`` -- ``gamma < 1`` times the continuation flag, never ``d`` on every transition.  A
target that moves by exactly ``d`` on every transition adds the next value undiscounted (``r + gamma * mask +
V'``, ``r + gamma + V'``): with no episode end among them the Bellman backup is no contraction, and the values
climb by about ``r + gamma`` at every update while the regression loss looks like any other.

Observed on the values the program computes, not on how its code is written: on a checked step (the iteration
before a checked optimizer step), the output of a watched module called in training mode under ``no_grad`` (a
target network, or the model itself evaluating the next states) is followed through every torch call of that
iteration by a :class:`~torch.overrides.TorchFunctionMode` that replays each call touching a followed tensor three
times: on the tensors as they are (a faithful copy), with the module's output raised by one common shift ``d``
(the output's largest magnitude, at least 1), and with it set to zero.  ``detach()`` and ``clone()`` are replays
like any other call, so a target built in a function, inline, under ``no_grad`` or detached is followed alike; a
call the replay cannot make ends the following for that tensor.  The target is found where a followed tensor
without gradient meets a prediction with gradient of as many elements: ``F.mse_loss`` / ``l1_loss`` /
``smooth_l1_loss`` / ``huber_loss`` or a subtraction (``q - y``).  There, on the device (read with the next
checked step's values): the faithful copy equals the program's target (else the following missed an in-place
write through a view: unjudged); every element moved by ``d`` to 1e-4 (undiscounted, every transition goes on);
the target with the next values at zero still varies across the batch (a reward or another term of its own: a
target that *is* another model's output, a teacher's or a mean teacher's, is no bootstrap).  Reported after two
checked looks at one line agree and none disagreed, when the code around the target reads a discount below
0.999 (``gamma``, ``discount``, ``self.gamma``, ``args.gamma`` ...): the program has a discount and its target
does not apply it.

Silent where the premise cannot be proven: no discount in reach, or one of 1 (an undiscounted episodic task by
design, an average-reward method), a discounted target or one with a terminal among its transitions (some
element moves by less than ``d``), n-step and lambda targets (``gamma ** n``), targets with no additive term,
modules in eval mode (the evaluation pass), targets followed through numpy, modules called with gradients.
Cost: only on the first :data:`WINDOWS` checked iterations with a training-mode ``no_grad`` forward; nothing on
other steps.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

import torch
from torch.overrides import TorchFunctionMode

from overt.guards import aside
from overt.guards.check import Check
from overt.guards.discount import discount_at, user_frame
from overt.guards.oneshot import OneShotHook
from overt.guards.swapped import compiling
from overt.guards.tdgrad import SQUARES, TdGradient
from overt.guards.where import is_overt_file, user_location_from

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

WINDOWS = 6  # checked iterations followed at most
LOOKS = 3  # judgements per target line
AGREE = 2  # agreeing looks that make a finding
MAX_FOLLOWED = 400  # tensors followed per window (then the window closes)
MIN_NUMEL = 8
TOL = 1e-4  # how close to the shift an undiscounted element moves (relative to the shift)
MAX_GAMMA = 0.999  # a discount closer to 1 cannot be told from none at TOL
_LOSSES = frozenset(("mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss"))
_SUBS = frozenset(("sub", "__sub__", "__rsub__", "subtract"))
_INPLACE_DUNDERS = frozenset(("__iadd__", "__isub__", "__imul__", "__itruediv__", "__ipow__", "__setitem__",
                              "__idiv__", "__ifloordiv__"))
# calls with effects beyond their result, or with no tensor result: never replayed
_NO_REPLAY = frozenset(("backward", "item", "tolist", "numpy", "__bool__", "__len__", "__repr__", "__str__",
                        "__format__", "__iter__", "__contains__", "__reduce_ex__", "__deepcopy__", "data_ptr",
                        "register_hook", "retain_grad", "requires_grad_", "record_stream", "share_memory_",
                        "untyped_storage", "storage", "size", "dim", "numel", "__hash__", "__eq__", "__ne__", "equal",
                        "__array__", "set_", "resize_", "copy_"))


# random draws: replaying them would move the user's generators (a tensor made by one is not followed)
_RANDOM_WORDS = ("rand", "dropout", "bernoulli", "multinomial", "normal", "poisson", "sample", "gumbel",
                 "exponential", "cauchy", "geometric", "uniform", "rrelu")
MAX_COPY = 1 << 20  # elements of an unfollowed tensor written in place that a replay copies (a replay memory is not)


def _replayable(func: Any, name: str) -> bool:
    if name in _NO_REPLAY or any(w in name for w in _RANDOM_WORDS):
        return False
    module = getattr(func, "__module__", None) or ""
    return not module.startswith("torch.distributed")


def _unwrapped(func: Any) -> Any:
    """The function an overt wrapper wraps (a loss swapped in by another check): calling the wrapper again from
    here would run its check a second time for one call of the user's."""
    while True:
        code = getattr(func, "__code__", None)
        inner = getattr(func, "__wrapped__", None)
        if code is None or inner is None or not is_overt_file(code.co_filename):
            return func
        func = inner


def _tensors(args: tuple, kwargs: dict) -> list[torch.Tensor]:
    out = [a for a in args if isinstance(a, torch.Tensor)]
    for a in args:
        if isinstance(a, (list, tuple)):
            out.extend(x for x in a if isinstance(x, torch.Tensor))
    out.extend(v for v in kwargs.values() if isinstance(v, torch.Tensor))
    return out


class _Follow(TorchFunctionMode):
    """Replays every torch call that touches a followed tensor on its three shadows (as is, shifted, zeroed)."""

    def __init__(self, check: BootShiftChecks, shift: torch.Tensor):
        super().__init__()
        self.check = check
        self.shift = shift
        self.live = True
        self.map: dict[int, tuple[torch.Tensor, list[torch.Tensor]]] = {}
        self.grad_seeds: list[tuple[torch.Tensor, str]] = []  # value-head outputs with gradient (tdgrad.py)

    def seed(self, t: torch.Tensor) -> None:
        base = t.detach()
        self.map[id(t)] = (t, [base.clone(), base + self.shift, torch.zeros_like(base)])

    def _shadow(self, x: Any, k: int) -> Any:
        if isinstance(x, torch.Tensor):
            hit = self.map.get(id(x))
            if hit is not None and hit[0] is x:
                return hit[1][k]
            return x
        if isinstance(x, (list, tuple)) and any(isinstance(v, torch.Tensor) for v in x):
            return type(x)(self._shadow(v, k) for v in x)
        return x

    def _followed(self, x: Any) -> bool:
        hit = self.map.get(id(x))
        return hit is not None and hit[0] is x

    def __torch_function__(self, func: Any, types: Any, args: tuple = (), kwargs: Any = None) -> Any:
        kwargs = kwargs or {}
        inner = _unwrapped(func)
        if not self.live or compiling():
            return inner(*args, **kwargs)
        if self.grad_seeds and getattr(func, "__name__", "") in SQUARES:
            try:
                self.check.td.squared(getattr(func, "__name__", ""), args, kwargs, self.grad_seeds,
                                      self.check.windows)
            except Exception as exc:  # noqa: BLE001  never break the user's call over a check
                self.check.s.check_failed(self.check, exc)
        if not self.map:
            return inner(*args, **kwargs)
        try:
            hits = [t for t in _tensors(args, kwargs) if self._followed(t)]
        except Exception:  # noqa: BLE001  never break the user's call
            hits = []
        if not hits or is_overt_file(sys._getframe(1).f_code.co_filename):
            return inner(*args, **kwargs)
        name = getattr(func, "__name__", "")
        if not _replayable(inner, name):
            return inner(*args, **kwargs)
        pending = None
        try:
            if name in _LOSSES or name in _SUBS:
                self.check.meets(name, args, self)
            pending = self._replay(inner, name, args, kwargs)
        except Exception:  # noqa: BLE001  a call the replay cannot make: not followed further
            pending = None
        out = inner(*args, **kwargs)
        if pending is not None:
            try:
                self._register(pending, args, out)
            except Exception:  # noqa: BLE001
                pass
        if len(self.map) > MAX_FOLLOWED:
            self.live = False
        return out

    def _replay(self, inner: Any, name: str, args: tuple, kwargs: dict) -> Any:
        inplace = (name.endswith("_") and not name.startswith("_")) or name in _INPLACE_DUNDERS
        if isinstance(kwargs.get("out"), torch.Tensor):
            return None
        outs = []
        with torch.no_grad():
            outs = self._replays(inner, inplace, args, kwargs)
        if outs is None:
            return None
        return ("inplace" if inplace else "out", outs)

    def _replays(self, inner: Any, inplace: bool, args: tuple, kwargs: dict) -> list[Any] | None:
        outs = []
        for k in range(3):
            a = [self._shadow(x, k) for x in args]
            kw = {key: self._shadow(v, k) for key, v in kwargs.items()}
            if inplace and a and isinstance(args[0], torch.Tensor) and not self._followed(args[0]):
                if args[0].numel() > MAX_COPY:
                    return None  # a write into a large store (a replay memory): not copied, not followed
                a[0] = args[0].detach().clone()  # the user's tensor before the write, written in a copy
            res = inner(*a, **kw)
            outs.append(a[0] if inplace else res)
        return outs

    def _register(self, pending: tuple, args: tuple, out: Any) -> None:
        kind, outs = pending
        if kind == "inplace":
            if isinstance(args[0], torch.Tensor) and all(isinstance(o, torch.Tensor) for o in outs):
                self.map[id(args[0])] = (args[0], list(outs))
            return
        if isinstance(out, torch.Tensor):
            if all(isinstance(o, torch.Tensor) and o.shape == out.shape for o in outs):
                self.map[id(out)] = (out, list(outs))
        elif isinstance(out, (tuple, list)):
            for i, o in enumerate(out):
                if isinstance(o, torch.Tensor) and o.is_floating_point():
                    sh = [r[i] for r in outs]
                    if all(isinstance(x, torch.Tensor) and x.shape == o.shape for x in sh):
                        self.map[id(o)] = (o, sh)


class BootShiftChecks(Check):
    name = "bootshift"

    def __init__(self, session: Any):
        super().__init__(session)
        self.mode: _Follow | None = None
        self.windows = 0
        self.hook = OneShotHook()
        self.seeded: dict[int, str] = {}  # id(followed output) -> the module's name
        self.looks: dict[str, list[bool]] = {}  # target line -> each look's verdict (True: undiscounted)
        self.done: set[str] = set()
        self.seen_sites: set[tuple[str, int]] = set()  # (line, window) judged already
        self.td = TdGradient(session)

    # -- seeding ---------------------------------------------------------------------------------------------------
    def on_eval_mode_forward(self, info: ModelInfo, args: tuple) -> None:
        if self.mode is not None:
            self._close()  # an evaluation forward: the iteration followed is over

    def on_no_grad_forward(self, info: ModelInfo) -> None:
        if self.mode is not None and not self.mode.live:
            self._close()
        if self.mode is None and self.windows >= WINDOWS:
            return
        if self.s.armed and not self.s.engine_loop and info.module.training and not self.hook.pending:
            self._place(info, grad=False)

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.mode is None and self.windows >= WINDOWS:
            return
        if self.s.armed and not self.s.engine_loop and info.module.training and not self.hook.pending \
                and self.s.optimizers:
            # a module no optimizer holds (a target network called with gradients, its output detached by the
            # program) gives next values as a no_grad forward does; a trained one may be a value head (before
            # the first optimizer step is seen, no module is known to be either)
            self._place(info, grad=self._trained(info.module))

    def _trained(self, module: Any) -> bool:
        held = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
        return any(id(p) in held for p in module.parameters())

    def _place(self, info: ModelInfo, grad: bool) -> None:
        if self.mode is None and self.windows >= WINDOWS:
            return
        if any(i.compiled for i in self.s.models.values()):
            return  # a compiled model would run under the function mode: not followed
        if aside.WINDOW is not None or aside.EARLY:
            return  # the axes window looks at the user's calls now: a mode above it would hide their lines
        if grad and len(self.td.done) >= 8:
            return  # enough squared-error lines judged
        self.hook.place(info.module, lambda m, a, out: self._seed(info, out, grad))

    def _seed(self, info: ModelInfo, out: Any, grad: bool) -> None:
        if not self.hook.fired():
            return
        try:
            outs = [out] if isinstance(out, torch.Tensor) else (
                list(out) if isinstance(out, (tuple, list)) else [])
            outs = [t for t in outs if isinstance(t, torch.Tensor) and t.is_floating_point() and t.numel()]
            if grad:  # value heads: one output per input, carrying gradient
                outs = [t for t in outs if t.requires_grad and t.dim() >= 2 and t.shape[-1] == 1]
            if not outs:
                return
            if self.mode is None:
                if self.windows >= WINDOWS:
                    return
                from overt.guards import patches

                if not patches.ACTIVE or torch._C._len_torch_function_stack():
                    # another check's probe re-runs the model (its own mode on the stack, sessions set aside): a
                    # mode pushed now would be the one that probe's ``with`` pops, leaving the probe's for good
                    return
                self.windows += 1
                shift = outs[0].detach().abs().amax().clamp_min(1.0)
                self.mode = _Follow(self, shift)
                torch._C._push_on_torch_function_stack(self.mode)
            for t in outs:
                if grad:
                    self.mode.grad_seeds.append((t, info.name))
                else:
                    self.mode.seed(t)
                    self.seeded[id(t)] = info.name
        except Exception as exc:  # noqa: BLE001
            self.s.check_failed(self, exc)

    def _close(self) -> None:
        mode, self.mode = self.mode, None
        self.seeded.clear()
        if mode is None:
            return
        mode.live = False
        mode.map.clear()
        try:
            aside.off_the_stack(mode)
        except Exception:  # noqa: BLE001
            pass

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        self._close()

    def after_checked_step(self, oi: OptInfo) -> None:
        self._close()

    def end_of_run(self) -> None:
        self._close()

    def on_crash(self, error: BaseException) -> None:
        self._close()

    def remove_hooks(self) -> None:
        self._close()
        self.hook.remove()

    # -- the target meets its prediction ---------------------------------------------------------------------------
    def meets(self, name: str, args: tuple, mode: _Follow) -> None:
        if len(args) < 2 or not all(isinstance(a, torch.Tensor) for a in args[:2]):
            return
        a, b = args[0], args[1]
        fa, fb = mode._followed(a), mode._followed(b)
        if fa == fb:
            return
        target, pred = (a, b) if fa else (b, a)
        if target.requires_grad or not pred.requires_grad or target.numel() != pred.numel():
            return
        if target.numel() < MIN_NUMEL or not target.is_floating_point():
            return
        frame = user_frame(2)
        if frame is None:
            return
        loc = user_location_from(frame) or "?"
        if loc in self.done or (loc, self.windows) in self.seen_sites:
            return
        self.seen_sites.add((loc, self.windows))
        found = discount_at(frame)
        if found is None or not 0.0 <= found[1] <= MAX_GAMMA:
            self.done.add(loc)  # no discount in reach, or one of 1: the premise cannot be proven here
            return
        rep, shf, zer = mode.map[id(target)][1]
        y = target.detach()
        scale = y.abs().amax() + 1.0
        faithful = (rep.reshape(y.shape) - y).abs().amax() <= 1e-5 * scale
        moved = (shf - rep).reshape(-1).float() / mode.shift
        undiscounted = (moved - 1.0).abs().amax() <= TOL
        z = zer.reshape(-1).float()
        varying = (z - z.mean()).abs().amax() > 1e-6 * (z.abs().amax() + 1e-12)
        vals = torch.stack((faithful.float(), undiscounted.float(), varying.float(), moved.mean()))
        what = next(iter(self.seeded.values()), "")  # the module whose output was followed first
        self.s.defer(vals, self._judge(loc, name, found, int(y.numel()), what))

    def _judge(self, loc: str, name: str, found: tuple[str, float], n: int, what: str):
        def callback(vals: list[float]) -> None:
            if loc in self.done:
                return
            faithful, undiscounted, varying, mean_move = vals
            if not faithful or not varying:
                return  # unjudged: the following lost a write, or the target has no term of its own
            if not undiscounted:
                self.done.add(loc)  # discounted somewhere: the premise holds
                return
            looks = self.looks.setdefault(loc, [])
            looks.append(True)
            if len(looks) >= AGREE:
                self.done.add(loc)
                self._report(loc, name, found, n, len(looks), what)
            elif len(looks) >= LOOKS:
                self.done.add(loc)

        return callback

    def _report(self, loc: str, name: str, found: tuple[str, float], n: int, looks: int, what: str) -> None:
        call = f"F.{name}" if name in _LOSSES else "the subtraction"
        src = f" that {what} computed under no_grad" if what else " computed under no_grad"
        gname, gamma = found
        msg = (f"the target regressed at {loc} ({call}) is bootstrapped from next-state values{src}, but it does "
               f"not discount them: raising every one of those values by d raised each of the {n} targets by "
               f"exactly d, on {looks} checked steps, while the code there reads the discount {gname} = {gamma:g}. "
               "A bootstrapped target is r + gamma * (1 - done) * V(s'): it moves by gamma * d on a transition that "
               "goes on and by 0 on one that ends. Added undiscounted (r + gamma * mask + V(s'), r + gamma + V(s')), "
               "the backup is no contraction: the values climb by about r + gamma at every update, the policy read "
               "from them is wrong, and the regression loss looks like any other.")
        fix = (f"multiply the next value by the discount and the continuation flag: target = reward + {gname} * "
               "(1 - done) * next_value.")
        self.s.report("targets-off-recursion", msg, where=f"target at {loc}", fix=fix, key=f"bootshift:{loc}")
