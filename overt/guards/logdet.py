"""Guard on a flow's log-determinant whose sign is flipped (slug ``log-det-sign-flipped``; issue 33).

An invariant of correct training with a normalising flow: a function that returns its output together with a
log-determinant, ``y, log_det = f(x)`` with ``y`` the shape of ``x``, returns ``log |det dy/dx|``, the log of
its own Jacobian's determinant, per row.  The change of variables ``log q(y) = log p(x) - log_det`` (or
``log p(x) = log p(y) + log_det`` the other way) only holds with that value; its negative rewards the flow for
shrinking the volume it should spread over (a reverse-KL flow collapses onto a point, a maximum-likelihood
flow is pushed to expand without bound) while the loss falls.

Seen on checked steps: while a step is checked, every method defined in a user class of a watched model's
modules (``forward`` included) is wrapped at its class; a call whose first argument is a floating
``(N, D)`` tensor (``N >= 2``, ``D <= MAX_DIM``) and whose result starts with a tensor of that shape and an
``(N,)`` tensor is probed once per method: the method is called again, inside the guards' probe (the model's
random generators, buffers and module attributes put back after), on ``ROWS`` detached rows of the argument,
and ``torch.autograd.functional.jacobian`` gives the Jacobian of its output.  Silent unless each row's output
depends on that row alone (cross-row blocks zero: no batch statistics, no data-dependent initialisation) and
the returned value is, on every probed row, the negative of ``log |det|`` of the row's own Jacobian block,
with ``|log |det|| >= MIN_LOGDET`` on some row (a volume-preserving map says nothing about the sign).  Any
other value (a log-probability, a per-sample loss, a log-determinant with a constant) proves nothing and keeps
the method silent, as do methods named as an inverse (``inverse``, ``reverse``, ``rev``, ``backward``) and calls that
ask for the inverse direction (``mode="inverse"``, ``reverse=True``), where some libraries (pytorch-flows'
``mode="inverse"``) return the forward direction's log-determinant by convention.  Nothing is wrapped around a
compiled model (``torch.compile``, ``Module.compile``: it would trace or guard on the replaced methods).
"""

from __future__ import annotations

import inspect
import re
import sys
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards import aside
from overt.guards.rerun import rerun
from overt.guards.check import Check
from overt.guards.where import short_location, user_class, user_frames

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

MAX_DIM = 16
ROWS = 3
MIN_LOGDET = 0.05
_TRIES = 3  # inconclusive probes (a volume-preserving map at this step) before a method is left alone
_INVERSE = re.compile(r"(^|_)(inverse|inv|reverse|rev|backward|decode)(_|$)")


def _user_classes(root: torch.nn.Module) -> list[type]:
    seen: dict[type, None] = {}
    for m in root.modules():
        cls = type(m)
        if cls in seen or cls.__module__.startswith(("torch.", "overt.")):
            continue
        if user_class(cls):
            seen[cls] = None
    return list(seen)


def _methods(cls: type) -> list[str]:
    return [name for name, fn in vars(cls).items()
            if inspect.isfunction(fn) and not (name.startswith("__") and name.endswith("__"))
            and not _INVERSE.search(name.lower())]


class LogDetChecks(Check):
    name = "logdet"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.wrapped: list[tuple[type, str, Callable[..., Any]]] = []
        self.done: set[tuple[type, str]] = set()
        self.tries: dict[tuple[type, str], int] = {}
        self.probing = False
        self.classes: tuple[int, list[type]] | None = None  # (the number of watched models, their user classes)

    # -- the wrappers live only through checked steps --------------------------------------------------
    def on_arming(self, oi: OptInfo) -> None:
        if self.s.armed:
            if not self.wrapped:
                self._install()
        elif self.wrapped:
            self._uninstall()

    def after_checked_step(self, oi: OptInfo) -> None:
        self._uninstall()

    def remove_hooks(self) -> None:
        self._uninstall()

    def _roots(self) -> list[torch.nn.Module]:
        """The watched models, and the modules of the user's frames on the stack (the optimizer step's
        callers: a script's globals, a training function's locals) that hold a watched optimizer's parameters:
        a flow trained through a method other than ``forward`` is never called as a module, only its layers
        are.

        Nothing found here is kept: only the classes are (``self.classes``).  A module kept past its step would
        outlive the user's references to it -- a DistributedDataParallel wrapper found in a frame holds its
        reducer and, through it, the process group, and gloo's process group destroyed late (after
        ``destroy_process_group``, in whatever thread collects the guards' session) deadlocks in its
        destructor."""
        roots = {id(i.module): i.module for i in self.s.models.values()}
        params = {id(p) for oi in self.s.optimizers.values() for g in oi.opt.param_groups for p in g["params"]}
        read: set[int] = set()  # the namespaces read (a module's globals are every frame of its functions')
        for frame, _ in user_frames(sys._getframe(2)):
            for space in (frame.f_locals, frame.f_globals):
                if id(space) in read:
                    continue
                read.add(id(space))
                for value in list(space.values()):
                    if isinstance(value, torch.nn.Module) and id(value) not in roots \
                            and any(id(p) in params for p in value.parameters()):
                        roots[id(value)] = value
        return list(roots.values())

    def _install(self) -> None:
        models = len(self.s.models)
        if self.classes is None or self.classes[0] != models:  # the user classes found once per set of models
            roots = self._roots()
            classes: dict[type, None] = {}
            compiled = any(getattr(m, "_compiled_call_impl", None) is not None
                           or type(m).__name__ == "OptimizedModule" for r in roots for m in r.modules())
            if not compiled:
                for root in roots:
                    for cls in _user_classes(root):
                        classes[cls] = None
            self.classes = (models, list(classes))
        if not self.classes[1] or any(info.compiled for info in self.s.models.values()):
            return  # a compiled model: methods replaced at their class would be traced or guarded on
        for cls in self.classes[1]:
            for name in _methods(cls):
                if (cls, name) in self.done:
                    continue
                original = vars(cls)[name]
                setattr(cls, name, self._wrapper(cls, name, original))
                self.wrapped.append((cls, name, original))

    def _uninstall(self) -> None:
        while self.wrapped:
            cls, name, original = self.wrapped.pop()
            setattr(cls, name, original)

    def _wrapper(self, cls: type, name: str, original: Callable[..., Any]) -> Callable[..., Any]:
        check = self

        def wrapper(obj: Any, *args: Any, **kwargs: Any) -> Any:
            out = original(obj, *args, **kwargs)
            if not check.probing and (cls, name) not in check.done and _shapes_fit(args, out) \
                    and not _inverse_call(args, kwargs):
                check._probe(cls, name, original, obj, args, kwargs)
            return out

        wrapper.__wrapped__ = original  # type: ignore[attr-defined]
        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__qualname__ = getattr(original, "__qualname__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        return wrapper

    # -- the probe --------------------------------------------------------------------------------------
    def _probe(self, cls: type, name: str, original: Callable[..., Any], obj: Any, args: tuple, kwargs: dict) -> None:
        mode = aside.WINDOW
        token = aside.step_aside(mode) if mode is not None else None
        self.probing = True
        try:
            verdict = self._jacobian_verdict(original, obj, args, kwargs)
        except Exception as exc:  # never break the user's call: the method is left alone
            self.done.add((cls, name))
            self.s.check_failed(self, exc)
            return
        finally:
            self.probing = False
            if token is not None:
                aside.back(token)
        key = (cls, name)
        if verdict is None:
            self.tries[key] = self.tries.get(key, 0) + 1
            if self.tries[key] >= _TRIES:
                self.done.add(key)
            return
        self.done.add(key)
        if verdict[0] == "flipped":
            # one finding per class: a method that calls another (a wrapper around forward) returns its value
            self.done.update((cls, m) for m in _methods(cls))
            self._report(cls, name, original, args[0].shape, verdict[1], verdict[2])

    def _jacobian_verdict(self, original: Callable[..., Any], obj: Any, args: tuple,
                          kwargs: dict) -> tuple[str, list[float], list[float]] | None:
        x = args[0]
        rows = x[:ROWS].detach().clone()
        rest = args[1:]
        root = obj if isinstance(obj, torch.nn.Module) else None
        with rerun(root, x.device), torch.enable_grad():
            cpu = torch.get_rng_state()

            def output(inp: torch.Tensor) -> torch.Tensor:
                torch.set_rng_state(cpu)  # the same draws on every call of the probe
                return original(obj, inp, *rest, **kwargs)[0]

            with torch.no_grad():
                torch.set_rng_state(cpu)
                ld = original(obj, rows, *rest, **kwargs)[1].detach().double()
            jac = torch.autograd.functional.jacobian(output, rows)
        n, d = rows.shape
        jac = jac.detach().double().reshape(n, d, n, d)
        eye = torch.eye(n, dtype=torch.bool, device=jac.device)
        cross = jac.permute(0, 2, 1, 3)[~eye]
        own = jac.permute(0, 2, 1, 3)[eye]  # (n, d, d): each row's own block
        scale = own.abs().max().item() + 1e-12
        if cross.numel() and cross.abs().max().item() > 1e-6 * scale:
            return None  # rows depend on each other (batch statistics): no per-row determinant
        sign, logdet = torch.linalg.slogdet(own)
        if bool((sign == 0).any()) or not bool(torch.isfinite(logdet).all()) or ld.shape != logdet.shape:
            return None
        if logdet.abs().max().item() < MIN_LOGDET:
            return None
        tol = 1e-3 * (1 + logdet.abs())
        if bool(((ld - logdet).abs() <= tol).all()):
            return ("right", ld.tolist(), logdet.tolist())
        if bool(((ld + logdet).abs() <= tol).all()):
            return ("flipped", ld.tolist(), logdet.tolist())
        return ("other", ld.tolist(), logdet.tolist())

    def _report(self, cls: type, name: str, original: Callable[..., Any], shape: Any, ld: list[float],
                logdet: list[float]) -> None:
        try:
            where = short_location(inspect.getsourcefile(original) or "", original.__code__.co_firstlineno)
        except (OSError, TypeError, AttributeError):
            where = f"{cls.__name__}.{name}"
        pairs = ", ".join(f"{a:+.3f} for {b:+.3f}" for a, b in zip(ld, logdet))
        msg = (f"{cls.__name__}.{name} (at {where}) returns its output (shape {list(shape)}, the shape of its input) "
               f"with a log-determinant whose sign is flipped: on {len(ld)} rows of a checked call it returned "
               f"{pairs} where log |det| of its own Jacobian (torch.autograd.functional.jacobian of the output "
               "with respect to the input, row by row) has the opposite sign. The change of variables holds only "
               "with +log |det dy/dx|: with its negative the likelihood rewards the flow for shrinking the volume it "
               "should spread over (a flow trained by reverse KL collapses onto a point, one trained by maximum "
               "likelihood expands without bound) while the loss falls.")
        fix = (f"accumulate the layers' log-determinants with the sign of the direction {name} computes (log_det += "
               "ld for each layer applied forward, -= only for a layer applied as its inverse), so that it returns "
               "log |det| of its own Jacobian")
        self.s.report("log-det-sign-flipped", msg, where=f"{cls.__name__}.{name} at {where}", fix=fix,
                      key=f"{cls.__module__}.{cls.__qualname__}")


def _shapes_fit(args: tuple, out: Any) -> bool:
    if not args or not isinstance(out, (tuple, list)) or len(out) < 2:
        return False
    x, y, ld = args[0], out[0], out[1]
    if not (isinstance(x, torch.Tensor) and isinstance(y, torch.Tensor) and isinstance(ld, torch.Tensor)):
        return False
    return (x.is_floating_point() and x.dim() == 2 and x.shape[0] >= 2 and 1 <= x.shape[1] <= MAX_DIM
            and y.shape == x.shape and tuple(ld.shape) == (x.shape[0],) and ld.is_floating_point())


def _inverse_call(args: tuple, kwargs: dict) -> bool:
    """A call that asks for the inverse direction (``mode="inverse"``, ``reverse=True``, ``rev=True``): libraries
    (pytorch-flows' ``mode="inverse"``) return the forward direction's log-determinant there by convention."""
    for key, value in kwargs.items():
        if _INVERSE.search(key.lower()) and value is True:
            return True
        if isinstance(value, str) and _INVERSE.search(value.lower()):
            return True
    return any(isinstance(a, str) and _INVERSE.search(a.lower()) for a in args)
