"""Guard on a user-written ``torch.autograd.Function`` whose backward is not linear in the gradient it is given
(slug ``custom-backward-not-linear``; issue 33, the wild corpus's w262).

An invariant of every correct backward: autograd computes a vector-Jacobian product, so what a node's backward
returns is linear in the gradient that reaches it -- the chain rule multiplies the incoming gradient by the local
derivative.  A straight-through estimator (the incoming gradient passed on, masked where the input was clipped), a
gradient-reversal layer (``-lambda * grad``), a hand-written activation's derivative, a quantiser's learnt scales
(``(mask * grad).sum()``): each is a linear map of ``grad`` whatever its forward computes.  A backward that builds
part of its result from something else -- the inputs, the weights, a constant (vinsis/ternary-quantization#1:
``a * full_precision_data * w_p`` where ``a * grad_data * w_p`` was meant) -- hands the optimizer a term the loss
never asked for: the parameters behind it drift by their own values and the loss stops steering them, with no
error.

What is proved, on checked training steps only, for a few nodes per class over the run: the wrapper of
``torch.autograd.backward`` that is in place while a checked step lasts (:mod:`overt.guards.termscale`, what
``loss.backward()`` calls) hands the roots to :meth:`GradLinearityChecks.on_backward`, which walks their graph
(the first :data:`WALKS` checked backwards, then every :data:`EVERY`-th) for nodes of classes whose ``backward``
is defined in the user's code, however ``apply`` was reached (``quantize = Quantize.apply`` taken at import
included), and puts a hook on them.  After autograd has run such a node's backward (its saved tensors are still
there), the hook calls the same backward twice more on the same context, under ``no_grad``: with the incoming
gradients and with them negated.  A linear map returns the negation of the first result; every result
slot whose two values do not cancel (``|a + b| > TOL * (|a| + |b|)``, read with the next checked step) shows a
part of the backward that does not come from the gradient, and is reported at the class's ``backward``.
Negation (not doubling) is the probe on purpose: it proves only that the backward is odd in the gradient, a
property deliberate, non-linear gradient shaping also has (a clip of the incoming gradient by its norm, its sign,
its normalisation, a symmetric clamp), so those stay silent, while a term that ignores the gradient (or grows with
its square) does not cancel.

Silent: a backward that draws random numbers (torch's, Python's or numpy's random state moved during the probe's
first call: noise added on purpose cannot be told from a bug by one draw), a backward that cannot run twice (it
raises: a saved tensor freed or modified in place), a backward whose code names autograd's entry points
(``torch.autograd.grad``, ``.backward``, ``enable_grad``: a hand-written reentrant checkpoint that backpropagates
through its recomputed block would accumulate into the parameters' ``.grad`` when run again), ``boxed_grads_call``
functions, classes defined in torch or a library, gradients taken with ``torch.autograd.grad`` (not walked), a
compiled graph. Everything the probe moves is put back: the random states and the attributes of the context
(``ctx``) the backward may set. Not put back: a Python side effect of ``backward`` itself (a backward that appends
to a list runs the append twice more on a probed node).
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any, Callable

import torch

from overt.guards import aside, probing
from overt.guards.check import Check
from overt.guards.putback import restore_host_random, save_host_random
from overt.guards.where import is_user_file, short_location

TOL = 1e-2  # |a + b| over |a| + |b|: a linear backward gives 0 (negation is exact in floating point), a term
# independent of the gradient gives 1
PROBES = 3  # nodes probed per class, over the run
PER_STEP = 4  # nodes probed per checked step, over all classes
WALKS = 3  # checked backwards whose graph is walked for user-written nodes, from the first ...
EVERY = 8  # ... then every EVERY-th checked backward (a Function that joins later: quantisation from epoch k)
MAX_NODES = 20000  # autograd nodes walked per backward
MAX_ROOTS = 16  # tensors of one backward call walked from

_FUNCTION = torch.autograd.Function
_AUTOGRAD_NAMES = frozenset(("backward", "grad", "enable_grad", "set_grad_enabled", "run_backward", "_run_backward",
                             "vjp"))
_USER: dict[type, bool] = {}  # class -> whether its backward is the user's


def _runs_autograd(code: Any) -> bool:
    """Whether a backward's code (or a function defined in it) names autograd's own entry points: a backward that
    recomputes its block and backpropagates through it (a hand-written reentrant checkpoint) would accumulate into
    the parameters' ``.grad`` when run again, so it is never probed."""
    todo = [code]
    while todo:
        c = todo.pop()
        if _AUTOGRAD_NAMES.intersection(c.co_names):
            return True
        todo += [k for k in c.co_consts if hasattr(k, "co_names")]
    return False


def _is_user_class(cls: type) -> bool:
    user = _USER.get(cls)
    if user is None:
        user = False
        fn = cls.__dict__.get("backward") or getattr(cls, "backward", None)
        fn = getattr(fn, "__func__", fn)
        code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
        if code is not None and fn is not _FUNCTION.backward and not getattr(cls, "boxed_grads_call", False):
            user = is_user_file(code.co_filename) and not _runs_autograd(code)
        _USER[cls] = user
    return user


def _backward_source(cls: type) -> tuple[str, int, ast.FunctionDef] | None:
    """(file, first line, parsed ``def``) of ``cls.backward`` (its innermost function when decorated)."""
    fn = inspect.unwrap(getattr(cls.backward, "__func__", cls.backward))
    try:
        lines, first = inspect.getsourcelines(fn)
        tree = ast.parse(textwrap.dedent("".join(lines)))
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef):
            return fn.__code__.co_filename, first, node
    return None


def backward_line(cls: type, slot: int | None = None) -> str:
    """``file.py:LINE`` of the line of ``cls.backward`` that builds its result ``slot``: the assignment of the name
    returned in that slot, else the ``return``, else the ``def``."""
    fn = inspect.unwrap(getattr(cls.backward, "__func__", cls.backward))
    found = _backward_source(cls)
    if found is None:
        return short_location(fn.__code__.co_filename, fn.__code__.co_firstlineno)
    path, first, fdef = found
    line = fdef.lineno
    returns = [n for n in ast.walk(fdef) if isinstance(n, ast.Return) and n.value is not None]
    if returns:
        value = returns[-1].value
        line = returns[-1].lineno
        if isinstance(value, ast.Tuple) and slot is not None and slot < len(value.elts):
            value = value.elts[slot]
            line = value.lineno
        elif slot not in (None, 0):
            value = None
        if isinstance(value, ast.Name):
            bound = [n.lineno for n in ast.walk(fdef) if isinstance(n, (ast.Assign, ast.AugAssign, ast.AnnAssign))
                     and any(isinstance(t, ast.Name) and t.id == value.id
                             for t in (n.targets if isinstance(n, ast.Assign) else [n.target]))
                     and n.lineno <= returns[-1].lineno]
            if bound:
                line = max(bound)
    return short_location(path, first + line - 1)


def _arg_names(cls: type) -> list[str]:
    """The names of ``forward``'s arguments, the context left out: the slots of backward's result."""
    try:
        params = list(inspect.signature(cls.forward).parameters.values())
    except (TypeError, ValueError):
        return []
    own_setup = getattr(cls, "setup_context", None) is not getattr(_FUNCTION, "setup_context", None)
    if not own_setup and params:
        params = params[1:]
    return [p.name for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]


def _random_states(devices: list) -> tuple:
    """Torch's (CPU and the devices'), Python's and numpy's random states."""
    return (torch.get_rng_state(), [torch.cuda.get_rng_state(d) for d in devices], *save_host_random())


def _same_states(a: tuple, b: tuple) -> bool:
    if not torch.equal(a[0], b[0]) or any(not torch.equal(x, y) for x, y in zip(a[1], b[1])) or a[2] != b[2]:
        return False
    if a[3] is None or b[3] is None:
        return True
    return a[3][0] == b[3][0] and bool((a[3][1] == b[3][1]).all()) and tuple(a[3][2:]) == tuple(b[3][2:])


def _put_back(states: tuple, devices: list) -> None:
    torch.set_rng_state(states[0])
    for d, s in zip(devices, states[1]):
        torch.cuda.set_rng_state(s, d)
    restore_host_random(states[2:])


def _as_tuple(out: Any) -> tuple:
    return out if isinstance(out, tuple) else (out,)


class GradLinearityChecks(Check):
    name = "gradinv"

    def __init__(self, session: Any):
        super().__init__(session)
        self.probed: dict[type, int] = {}
        self.done: set[type] = set()
        self.this_step = 0
        self.backwards = 0

    def after_checked_step(self, oi: Any) -> None:
        self.this_step = 0

    def wants(self, cls: type) -> bool:
        return cls not in self.done and self.probed.get(cls, 0) < PROBES and self.this_step < PER_STEP

    def on_backward(self, tensors: Any) -> None:
        """``torch.autograd.backward(tensors)`` is about to run on a checked step: hook the nodes of user-written
        autograd.Functions in its graph (a walk from the roots, at most :data:`MAX_NODES` nodes), while some class
        may still be probed: the first :data:`WALKS` checked backwards, then every :data:`EVERY`-th."""
        self.backwards += 1
        if self.backwards > WALKS and self.backwards % EVERY or torch.compiler.is_compiling():
            return
        roots = [tensors] if isinstance(tensors, torch.Tensor) else list(tensors or ())[:MAX_ROOTS]
        todo = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        seen = set(todo)
        while todo and len(seen) <= MAX_NODES and self.this_step < PER_STEP:
            node = todo.pop()
            cls = getattr(node, "_forward_cls", None)
            if cls is not None and _is_user_class(cls) and self.wants(cls):
                self._hook(cls, node)
            for nxt, _ in node.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)

    def _hook(self, cls: type, node: Any) -> None:
        self.probed[cls] = self.probed.get(cls, 0) + 1
        self.this_step += 1
        check = self

        def hook(grad_inputs: Any, grad_outputs: Any) -> None:
            if probing.ACTIVE:  # a check's own backward, not the step's
                return
            try:
                check._probe(cls, node, grad_outputs)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's backward
                check.s.check_failed(check, exc)

        node.register_hook(hook)

    def _probe(self, cls: type, node: Any, grads: tuple) -> None:
        grads = tuple(grads)
        if not any(isinstance(g, torch.Tensor) for g in grads):
            return
        user_fn = node._get_user_fn() if hasattr(node, "_get_user_fn") else cls.backward
        devices = sorted({g.device for g in grads if isinstance(g, torch.Tensor) and g.device.type == "cuda"},
                         key=str)
        before = _random_states(devices)
        saved = dict(node.__dict__) if hasattr(node, "__dict__") else None
        same = [g.clone() if isinstance(g, torch.Tensor) else g for g in grads]
        neg = [-g if isinstance(g, torch.Tensor) else g for g in grads]
        try:
            with torch.no_grad(), aside.user_code():
                first = _as_tuple(user_fn(node, *same))
                if not _same_states(before, _random_states(devices)):
                    return  # a stochastic backward (noise added on purpose?): one draw proves nothing
                if saved is not None:  # the second call sees the context as the first did
                    node.__dict__.clear()
                    node.__dict__.update(saved)
                second = _as_tuple(user_fn(node, *neg))
        except Exception:  # noqa: BLE001  a backward that cannot run again: nothing proved
            return
        finally:
            _put_back(before, devices)
            if saved is not None:
                node.__dict__.clear()
                node.__dict__.update(saved)
        slots, ratios = [], []
        with torch.no_grad():
            for i, (a, b) in enumerate(zip(first, second)):
                if not (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)) or a.shape != b.shape:
                    continue
                if not a.is_floating_point() or not b.is_floating_point():
                    continue
                a, b = a.detach().double(), b.detach().double()
                ratios.append((a + b).norm() / (a.norm() + b.norm()).clamp_min(1e-300))
                slots.append(i)
        if not ratios:
            return
        self.s.defer(torch.stack(ratios), self._judge(cls, slots))

    def _judge(self, cls: type, slots: list[int]) -> Callable[[list[float]], None]:
        def callback(vals: list[float]) -> None:
            if cls in self.done:
                return
            bad = [(v, i) for v, i in zip(vals, slots) if v > TOL]
            if not bad:
                return
            self.done.add(cls)
            names = _arg_names(cls)
            args = ", ".join(f"`{names[i]}`" if i < len(names) else f"#{i + 1}" for _, i in bad)
            worst = max(v for v, _ in bad)
            where = backward_line(cls, max(bad)[1])
            self.s.report(
                "custom-backward-not-linear",
                f"the custom autograd.Function {cls.__name__} has a backward that is not linear in the "
                f"gradient it is given: called again on the same saved context with the incoming gradient negated, "
                f"its gradient for {args} (built at {where}) does not come back negated (|g(-grad) + g(grad)| is "
                f"{worst:.0%} of their size; a vector-Jacobian product gives exactly 0). Part of what it returns is "
                "built from something other than the incoming gradient (the inputs, the weights, a constant), so the "
                "optimizer receives a term the loss never asked for: the parameters behind it drift by their own "
                "values and the loss stops steering them, with no error.",
                fix=(f"make every term of {cls.__name__}.backward's result a product of the incoming gradient and the "
                     "local derivative (grad_output * d(output)/d(input), e.g. `mask * grad_output * scale` rather "
                     "than `mask * input * scale`); a regulariser belongs in the loss, not in backward"),
                where=f"{cls.__name__}.backward at {where}", key=cls.__qualname__)

        return callback
