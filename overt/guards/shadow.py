"""Guard on a copy of the model that the program reads but that does not follow the model (slugs
``eval-model-stale``, widened to copies read while training, and ``average-diverges-from-model``; issue 33).

An invariant of every program that keeps a shadow of the weights it trains -- an EMA or SWA average, the
target network of a Q-learner, a mean teacher, a momentum encoder, a copy evaluated between epochs: the
shadow is made from the trained model and follows it.  Whatever the update rule, the shadow is at every
moment some mix of weights the trained model had, so two things never happen in a correct program:

- the shadow is read all through training and still holds the trained model's *random initialisation*
  bit for bit (its sync never ran: a condition that is never true, an update applied to another object,
  w27's DQN target network);
- the shadow is updated and its weights grow beyond any the trained model had: a weighted mean of the
  model's weights ``sum_t a_t W_t`` with ``a_t >= 0`` summing to 1 has a norm of at most ``max_t |W_t|``
  (the triangle inequality), so a norm twice the largest the model ever had is no average of it (a sign
  flipped in ``s -= (1 - d) * (s - p)``, w214; a decay above 1; ``s = d * s + p`` without the ``1 - d``).

Who is a shadow: at the first checked step of a trained model ``T`` (held by the optimizer that steps),
the user's frames on the stack (the locals of the function that steps, up to the script's globals) are
read once for modules, and modules kept one attribute deep in the user's own objects (``ema.shadow``,
``agent.target``), with exactly ``T``'s parameter shapes, whose parameters no optimizer holds and that share
no memory with ``T``; at most :data:`MAX_COPIES`.  A one-shot forward pre-hook on each, put back after each
checked step, records that it was read (a forward) in that stretch of training and where.  Nothing runs on
other steps but that hook's first call per stretch; the host reads happen at the end of the run.

What is proven before anything is said (at the end of the run, on strided samples of the first
:data:`MAX_PARAMS` parameter tensors, :func:`overt.guards.samples.weight_sample`):

- frozen at the initialisation (``eval-model-stale``): the copy was read on at least :data:`MIN_READS`
  stretches, the latest in the second half of the run; none of its parameters was written since the
  first step (version counters); its sample equals ``T``'s before its first step exactly; ``T`` moved at
  least :data:`MOVED` of its norm; ``T`` was not loaded before training, and every layer of ``T`` held,
  before its first step, the values of PyTorch's default initialisation (every ``Linear``/``Conv``
  weight and bias within ``1/sqrt(fan_in)``, the larger ones filling that range): a copy of a pretrained
  model kept as a reference (a KL penalty's reference policy, a frozen teacher) is never judged;
- diverged (``average-diverges-from-model``): the copy's parameters were written in place at least
  :data:`MIN_WRITES` times since the first step, none holds a gradient (it is not trained by hand), it
  was read at least once, and at the end its sample's norm is more than :data:`GROW` times the largest
  norm of ``T``'s sample at any checked step (the first and the last included) and its distance to ``T``
  more than :data:`GROW` times the distance ``T`` moved.

The same frames yield averages kept as dictionaries of tensors keyed by ``T``'s parameter names (QANet's
``EMA.shadow``, one attribute deep in the user's objects, sharing no memory with ``T``).  For them
``eval-copy-near-initial``'s resumed form (the module form is :mod:`overt.guards.evalcopy`'s): ``T`` was
loaded once before training (the weights the load replaced were sampled then, ``P``) and is the only model of
its architecture loaded so; the dictionary was written since; at the end it lies less than ``NEAR`` of the
way from ``P`` to ``T``'s trained weights (and moved from ``P``): the average was taken before the load.
Frames are read at the first checked step of each trained model (a model or optimizer found late, as a
resumed run's, is seen then; its weights then are no initialisation, so the frozen form needs step 0).
"""

from __future__ import annotations

import inspect
import math
import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.evalcopy import FROZEN as NEAR_FROZEN
from overt.guards.evalcopy import MOVED as LOAD_MOVED
from overt.guards.evalcopy import NEAR
from overt.guards.samples import weight_sample
from overt.guards.stale_eval import param_shapes
from overt.guards.where import short_location, user_frames, user_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

MAX_PARAMS = 64  # parameter tensors sampled per model
MAX_COPIES = 8  # shadows followed
MAX_TRAINED = 4  # trained models followed
MAX_FRAMES = 16  # frames walked from the step to the outermost user frame
MAX_NAMES = 256  # names read per frame, attributes per object
MIN_READS = 3  # stretches between checked steps in which a frozen copy was read
MOVED = 0.05  # the trained model moved at least this share of its initial norm
MIN_WRITES = 8  # in-place writes into every parameter of an updated copy
GROW = 2.0  # an updated copy's norm over the largest the trained model had, above which it is no average
_LAYERS = (nn.Linear, nn.Conv1d, nn.Conv2d, nn.Conv3d)
_NOT_OBJECTS = (type, type(sys), type(len), type(lambda: 0))


def _float_params(module: nn.Module) -> list[torch.Tensor]:
    return [p for p in list(module.parameters())[:MAX_PARAMS] if p.is_floating_point() and p.numel()]


def _sample(params: list[torch.Tensor]) -> torch.Tensor:
    with torch.no_grad():
        return weight_sample(params)


def default_init(module: nn.Module) -> torch.Tensor | None:
    """A boolean tensor (on the device, not read): every parameter of ``module`` belongs to a ``Linear`` or
    ``Conv`` layer whose weight and bias hold PyTorch's default initialisation (uniform within
    ``1/sqrt(fan_in)``: every value inside that bound, the larger layers' largest value near it and their mean
    absolute value half of it).  None when some parameter belongs to another kind of layer."""
    layers = [m for m in module.modules() if isinstance(m, _LAYERS)][:32]
    covered = {id(p) for m in layers for p in m.parameters(recurse=False)}
    params = [p for p in module.parameters() if p.is_floating_point()]
    if not layers or any(id(p) not in covered for p in params):
        return None
    oks = []
    with torch.no_grad():
        for m in layers:
            w = m.weight.detach()
            if w.dim() < 2 or not w.numel():
                return None
            bound = 1.0 / math.sqrt(w[0].numel())
            a = w.abs().float()
            top = a.max()
            oks.append(top <= bound * 1.0001)
            if w.numel() >= 128:  # the largest of n uniform values lies below 0.95 of the bound with 0.95^n
                oks.append(top >= 0.95 * bound)
            if w.numel() >= 1024:  # mean |w| = bound / 2, its standard error 0.29 * bound / sqrt(n)
                oks.append((a.mean() - bound / 2).abs() <= 0.05 * bound)
            if m.bias is not None and m.bias.numel():
                oks.append(m.bias.detach().abs().float().max() <= bound * 1.0001)
    return torch.stack(oks).all()


class _Trained:
    __slots__ = ("module", "name", "shapes", "t0", "fresh", "top")

    def __init__(self, module: nn.Module, name: str, shapes: tuple, t0: torch.Tensor,
                 fresh: torch.Tensor | None) -> None:
        self.module = weakref.ref(module)
        self.name = name
        self.shapes = shapes
        self.t0 = t0  # its sample before its first step
        self.fresh = fresh  # default_init(...) then
        self.top = t0.norm()  # the largest norm of its sample at a checked step (on the device)


class _Copy:
    __slots__ = ("module", "path", "owner", "trained", "versions", "reads", "first_where", "last_where", "handle")

    def __init__(self, module: nn.Module, path: str, owner: type | None, trained: _Trained) -> None:
        self.module = weakref.ref(module)
        self.path = path
        self.owner = owner  # the class of the user's object that keeps it (``ema.shadow``), if any
        self.trained = trained
        self.versions = [p._version for p in _float_params(module)]
        self.reads: list[int] = []  # the session's step at the first read of each stretch
        self.first_where: str | None = None
        self.last_where: str | None = None
        self.handle: Any = None


def _objects(frame: Any) -> list[tuple[str, Any]]:
    """(name, value) of the user's frames from ``frame`` outwards: locals, innermost first, then
    the outermost user frame's globals (a script's top level)."""
    out: list[tuple[str, Any]] = []
    seen: set[int] = set()
    outer = None
    for frame, _ in user_frames(frame)[:MAX_FRAMES]:
        outer = frame
        for name, value in list(frame.f_locals.items())[:MAX_NAMES]:
            if id(value) not in seen:
                seen.add(id(value))
                out.append((name, value))
    if outer is not None:
        for name, value in list(outer.f_globals.items())[:MAX_NAMES]:
            if id(value) not in seen and not name.startswith("__"):
                seen.add(id(value))
                out.append((name, value))
    return out


def _modules(named: list[tuple[str, Any]]) -> list[tuple[str, nn.Module, type | None]]:
    """The modules among ``named`` and kept one attribute deep in the user's own objects (with the
    keeping object's class)."""
    out: list[tuple[str, nn.Module, type | None]] = []
    for name, value in named:
        if isinstance(value, nn.Module):
            out.append((name, value, None))
            continue
        if isinstance(value, _NOT_OBJECTS):
            continue
        owner = type(value).__module__ or ""
        if owner.split(".")[0] in ("torch", "overt", "numpy", "builtins"):
            continue
        try:
            attrs = list(object.__getattribute__(value, "__dict__").items())[:MAX_NAMES]
        except Exception:  # noqa: BLE001  no instance dictionary (slots, a proxy): nothing kept there
            continue
        out.extend((f"{name}.{attr}", v, type(value)) for attr, v in attrs if isinstance(v, nn.Module))
    return out


def _tensor_dicts(named: list[tuple[str, Any]]) -> list[tuple[str, dict]]:
    """Dictionaries of tensors keyed by name among ``named`` and one attribute deep in the user's own objects
    (an average kept as ``{name: tensor}``, QANet's ``EMA.shadow``)."""
    out: list[tuple[str, dict]] = []

    def take(path: str, value: Any) -> None:
        if isinstance(value, dict) and 0 < len(value) <= 4096:
            items = list(value.items())[:MAX_NAMES]
            if all(isinstance(k, str) and isinstance(v, torch.Tensor) for k, v in items):
                out.append((path, value))

    for name, value in named:
        if isinstance(value, dict):
            take(name, value)
            continue
        if isinstance(value, (nn.Module, *_NOT_OBJECTS)):
            continue
        owner = type(value).__module__ or ""
        if owner.split(".")[0] in ("torch", "overt", "numpy", "builtins"):
            continue
        try:
            attrs = list(object.__getattribute__(value, "__dict__").items())[:MAX_NAMES]
        except Exception:  # noqa: BLE001
            continue
        for attr, v in attrs:
            take(f"{name}.{attr}", v)
    return out


_WRITES = ("add_(", "sub_(", "lerp_(", "mul_(", "copy_(", "+=", "-=", "*=", ".data =")


def updater(owner: type, attr: str) -> tuple[str, str] | None:
    """Where the user's class ``owner`` writes its attribute ``attr``: ``("Class.method", "file:line")`` at the
    first in-place write of a method (not ``__init__``) that reads ``self.<attr>``; None if none is found."""
    try:
        for fname, fn in vars(owner).items():
            fn = getattr(fn, "__wrapped__", fn)
            if fname == "__init__" or not inspect.isfunction(fn):
                continue
            lines, first = inspect.getsourcelines(fn)
            if not any(f"self.{attr}" in line for line in lines):
                continue
            for i, line in enumerate(lines):
                if any(w in line for w in _WRITES):
                    return f"{owner.__name__}.{fname}", short_location(fn.__code__.co_filename, first + i)
    except (OSError, TypeError):  # no source (a class built at run time)
        return None
    return None


class ShadowChecks(Check):
    name = "shadow"

    def __init__(self, session: Any):
        super().__init__(session)
        self.trained: dict[int, _Trained] = {}  # id(T's module) -> its record
        self.copies: dict[int, _Copy] = {}  # id(copy module) -> its record
        # averages kept as {parameter name: tensor}: (path, the dict, its trained model, names, versions then)
        self.seen: set[tuple[int, int]] = set()  # (id(optimizer info), models watched) already looked at
        self.dicts: list[tuple[str, dict, _Trained, list[str], list[int]]] = []

    # -- the first checked step of a trained model: T0, and the shadows the user keeps ----------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if self.copies and oi.steps:
            self._top(oi)
        seen = (id(oi), len(self.s.models))
        if seen in self.seen or len(self.trained) >= MAX_TRAINED:
            return  # the same optimizer over the same models: nothing new to find (O(1) on later checked steps)
        self.seen.add(seen)
        held = {id(p) for p in oi.params}
        new = []
        for info in list(self.s.models.values()):
            m = info.module
            if id(m) in self.trained or len(self.trained) >= MAX_TRAINED:
                continue
            params = _float_params(m)
            if params and any(id(p) in held for p in params):
                # first seen at a later step (a model found late, a resumed optimizer): its weights then are not
                # its initialisation, so it is never judged as one (the frozen form needs the default init)
                fresh = default_init(m) if oi.steps == 0 else None
                rec = _Trained(m, info.name, param_shapes(m), _sample(params), fresh)
                self.trained[id(m)] = rec
                new.append(rec)
        if new:
            self._find_copies(new)

    def _top(self, oi: OptInfo) -> None:
        """The largest norm each followed trained model's sample had, kept on the device (no read); only for
        a trained model with a copy that has been written (a frozen copy needs no norm)."""
        written = set()
        for c in self.copies.values():
            m = c.module()
            if m is not None and id(c.trained) not in written:
                first = next((p for p in _float_params(m)[:1]), None)
                if first is not None and c.versions and first._version != c.versions[0]:
                    written.add(id(c.trained))
        if not written:
            return
        held = {id(p) for p in oi.params}
        for rec in self.trained.values():
            if id(rec) not in written:
                continue
            m = rec.module()
            if m is None:
                continue
            params = _float_params(m)
            if params and any(id(p) in held for p in params):
                rec.top = torch.maximum(rec.top, _sample(params).norm().to(rec.top.device))

    def _find_copies(self, new: list[_Trained]) -> None:
        held = {id(p) for o in self.s.optimizers.values() for p in o.params}
        trained_ids = {k for k in self.trained}
        by_shapes: dict[tuple, list[_Trained]] = {}
        for rec in self.trained.values():
            by_shapes.setdefault(rec.shapes, []).append(rec)
        objects = _objects(sys._getframe(1))
        named = _modules(objects)
        self._find_dicts(_tensor_dicts(objects), new)
        for rec in new:  # the trained model by the user's own name for it
            label = next((path for path, m, _ in named if m is rec.module() and "." not in path), None)
            if label:
                rec.name = label
        named += [(info.name, info.module, None) for info in self.s.models.values()]
        for path, module, owner in named:
            if len(self.copies) >= MAX_COPIES:
                return
            if id(module) in self.copies or id(module) in trained_ids:
                continue
            if type(module).__name__ == "OptimizedModule" or getattr(module, "_compiled_call_impl", None):
                continue  # compiled: a hook of ours would break its graph
            params = list(module.parameters())
            if not params or any(id(p) in held for p in params):
                continue
            recs = by_shapes.get(param_shapes(module), [])
            if len(recs) != 1 or recs[0] not in new:
                continue  # none, or several trained models of this architecture: whose copy it is is unknown
            rec = recs[0]
            t = rec.module()
            if t is None:
                continue
            ptrs = {p.untyped_storage().data_ptr() for p in t.parameters()}
            if any(p.untyped_storage().data_ptr() in ptrs for p in params):
                continue  # shares memory with the trained model (a view of it, a state_dict alias)
            c = self.copies[id(module)] = _Copy(module, path, owner, rec)
            self._listen(module, c)

    def _find_dicts(self, found: list[tuple[str, dict]], new: list[_Trained]) -> None:
        """Averages kept as ``{parameter name: tensor}`` of one new trained model (its names and shapes)."""
        for path, d in found:
            if len(self.dicts) >= MAX_COPIES or any(x[1] is d for x in self.dicts):
                continue
            for rec in new:
                t = rec.module()
                if t is None:
                    continue
                names = [n for n, p in list(t.named_parameters())[:MAX_PARAMS] if p.is_floating_point() and p.numel()]
                shapes = dict((n, tuple(p.shape)) for n, p in t.named_parameters())
                tensors = [d.get(n) for n in names]
                if not names or any(v is None or tuple(v.shape) != shapes[n] for n, v in zip(names, tensors)):
                    continue
                ptrs = {p.untyped_storage().data_ptr() for p in t.parameters()}
                if any(v.untyped_storage().data_ptr() in ptrs for v in tensors):
                    break  # the model's own tensors (a state_dict kept as a snapshot)
                self.dicts.append((path, d, rec, names, [v._version for v in tensors]))
                break

    # -- reads: one forward per stretch between checked steps ------------------------------------
    def _listen(self, module: nn.Module, c: _Copy) -> None:
        def pre(mod: nn.Module, args: tuple) -> None:
            try:
                if c.handle is not None:
                    c.handle.remove()
                    c.handle = None
                if len(c.reads) < 4096:
                    c.reads.append(self.s.step)
                where = user_location(skip=2)
                if c.first_where is None:
                    c.first_where = where
                c.last_where = where
            except Exception as exc:  # noqa: BLE001  never break the user's forward
                self.s.check_failed(self, exc)

        c.handle = module.register_forward_pre_hook(pre)

    def after_checked_step(self, oi: OptInfo) -> None:
        for c in self.copies.values():
            if c.handle is None:
                m = c.module()
                if m is not None:
                    self._listen(m, c)

    def remove_hooks(self) -> None:
        for c in self.copies.values():
            if c.handle is not None:
                c.handle.remove()
                c.handle = None

    # -- the end ---------------------------------------------------------------------------------
    def end_of_run(self) -> None:
        if self.dicts:
            self._dict_near_load()
        for c in list(self.copies.values()):
            e, rec = c.module(), c.trained
            t = rec.module()
            if e is None or t is None or not c.reads:
                continue
            e_params, t_params = _float_params(e), _float_params(t)
            if not e_params or len(e_params) != len(c.versions):
                continue
            e_s, t_s = _sample(e_params), _sample(t_params)
            t0 = rec.t0.to(t_s.device)
            way = float(torch.dist(t_s, t0))
            writes = [p._version - v for p, v in zip(e_params, c.versions)]
            if max(writes) == 0:
                self._frozen(c, e_s.to(t0.device), t0, way)
            elif min(writes) >= MIN_WRITES and all(p.grad is None for p in e.parameters()):
                self._diverged(c, e_s.to(t_s.device), t_s, way, min(writes))

    def _dict_near_load(self) -> None:
        """An average kept as a dictionary, taken from the model before its ``load_state_dict``: updated since,
        and still near the weights the load replaced (``eval-copy-near-initial``'s resumed form, whose
        module form ``overt/guards/evalcopy.py`` proves)."""
        evalcopy = getattr(self.s, "evalcopy", None)
        if evalcopy is None:
            return
        for path, d, rec, names, versions in self.dicts:
            t = rec.module()
            ld = evalcopy.loads.get(id(t)) if t is not None else None
            if ld is None or ld.module() is not t or ld.sample is None:
                continue
            loaded = [x for x in evalcopy.loads.values() if x.sample is not None and x.module() is not None
                      and param_shapes(x.module()) == rec.shapes]
            if len(loaded) != 1:
                continue  # several models of this architecture loaded before training (federated clients)
            tensors = [d.get(n) for n in names]
            if any(v is None or not isinstance(v, torch.Tensor) for v in tensors):
                continue
            if all(v._version == old for v, old in zip(tensors, versions)):
                continue  # never updated: a frozen snapshot, not an average
            try:
                e_s = _sample(tensors)
            except RuntimeError:
                continue
            p_s = ld.sample.to(e_s.device)
            t_s = _sample(_float_params(t)).to(e_s.device)
            way = float(torch.dist(t_s, p_s))
            if way <= LOAD_MOVED * max(float(p_s.norm()), 1e-12):
                continue
            from_pre = float(torch.dist(e_s, p_s))
            if from_pre <= NEAR_FROZEN * way or from_pre >= NEAR * way:
                continue
            load = f" at {ld.where}" if ld.where else ""
            self.s.report(
                "eval-copy-near-initial",
                f"{path}, an average of {rec.name}'s weights kept as a dictionary of tensors and updated during "
                f"training, is still near the weights {rec.name} had before its load_state_dict{load}: it is "
                f"{from_pre / way:.0%} of the way from them to {rec.name}'s trained weights (over strided samples). "
                f"It was taken from {rec.name} before the checkpoint was loaded into it: the load replaced the live "
                "weights only, and the average is mostly the weights the load threw away (a random "
                "initialisation), so whatever is evaluated or saved from it scores like an untrained model.",
                fix=f"create the average after {rec.name}.load_state_dict(...){load} (or load the average's own "
                "state from the checkpoint too)",
                where=ld.where or path, key=path,
            )

    def _frozen(self, c: _Copy, e_s: torch.Tensor, t0: torch.Tensor, way: float) -> None:
        rec = c.trained
        steps = sorted(set(c.reads))
        if len(steps) < MIN_READS or steps[-1] * 2 < self.s.step or rec.fresh is None:
            return
        if way < MOVED * float(t0.norm()) or not torch.equal(e_s, t0) or not bool(rec.fresh):
            return
        evalcopy = getattr(self.s, "evalcopy", None)
        t = rec.module()
        if evalcopy is not None and t is not None and id(t) in evalcopy.loads:
            return  # T's weights came from a checkpoint: a copy of them is a reference, not an initialisation
        if self.s.reporter.has("eval-model-stale", c.path):
            return
        where = f" at {c.first_where}" if c.first_where else ""
        self.s.report(
            "eval-model-stale",
            f"{c.path} is read all through training (a forward{where}, seen in {len(steps)} stretches between "
            f"checked steps up to step {steps[-1]}) and still holds, bit for bit, the random initialisation "
            f"{rec.name} had before its first step: it has {rec.name}'s architecture, no optimizer holds it and "
            f"none of its parameters was written since, while {rec.name} trained "
            f"({way / max(float(t0.norm()), 1e-12):.0%} of its initial norm away from it). A copy the program "
            "reads while it trains (a target network, a teacher, an evaluated copy) is meant to follow the model; "
            f"this one never did, so every value read from it (bootstrapped targets, distillation targets, "
            "validation scores) comes from an untrained random network. Usual causes: the sync sits behind a "
            "condition that is never true (a counter that does not move), or it updates another object.",
            fix=f"sync {c.path} from the trained model: {c.path}.load_state_dict({rec.name}.state_dict()) every N "
            "updates, on a counter of the updates themselves (or a soft update after each step)",
            where=c.first_where or f"{c.path} forward", key=c.path,
        )

    def _diverged(self, c: _Copy, e_s: torch.Tensor, t_s: torch.Tensor, way: float, writes: int) -> None:
        rec = c.trained
        top = max(float(rec.top), float(t_s.norm()))
        norm = float(e_s.norm())
        if top <= 0 or norm <= GROW * top or float(torch.dist(e_s, t_s)) <= GROW * way:
            return
        if self.s.reporter.has("average-diverges-from-model", c.path):
            return
        where = f" (read at {c.last_where})" if c.last_where else ""
        update = updater(c.owner, c.path.rsplit(".", 1)[1]) if c.owner is not None else None
        by = f" (by {update[0]} at {update[1]})" if update else ""
        self.s.report(
            "average-diverges-from-model",
            f"{c.path}{where} is a copy of {rec.name}'s architecture that no optimizer holds and that the program "
            f"updates in place{by}, {writes} or more times for each of its parameters since {rec.name}'s first "
            f"step, but it has moved away from {rec.name}: its weights' norm is {norm / top:.1f}x the largest "
            f"{rec.name} had at any checked step (over strided samples). An average of a model's weights (an "
            "EMA, SWA, a Polyak or soft-updated target network, a mean teacher) is a weighted mean of weights the "
            "model had, and no such mean is larger than the largest of them: this update pushes the copy away "
            "from the model instead of toward it (a sign flipped in shadow -= (1 - decay) * (shadow - param), a "
            "decay above 1, shadow = decay * shadow + param without the 1 - decay), so whatever is evaluated, "
            "bootstrapped from or saved from it is garbage while training itself looks normal.",
            fix="move the copy toward the model: shadow.lerp_(param, 1 - decay), i.e. shadow -= (1 - decay) * "
            "(shadow - param), with 0 <= decay <= 1",
            where=(update[1] if update else c.last_where) or f"{c.path} forward", key=c.path,
        )
