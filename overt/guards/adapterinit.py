"""Guard on adapters that change the frozen model they are added to before training starts (slug
``adapter-not-identity-at-init``; issue 33, the wild corpus's w105).

An invariant of parameter-efficient fine-tuning: a module that wraps a frozen (pretrained) module and adds
a trainable branch to its output -- LoRA's ``base(x) + B(A(x)) * scale``, a parallel or bottleneck adapter,
a zero-convolution control branch -- starts as the module it wraps.  The branch is a product of trainable
factors (``B @ A``, ``up(act(down(x)))``), and one factor starts at zero (LoRA's B, the adapter's
up-projection), so the adapted model's first forward is the pretrained model's.  A branch whose factors
are all drawn at random (``kaiming_uniform_`` on B, hao-ai-lab/FastVideo#781) perturbs every adapted layer
before the first step: fine-tuning spends itself undoing the perturbation and ends worse, with no error.

What is proved, on the model's first checked training forward only (among its first eight) (nothing on any other step): for each
module ``M`` with a child ``C`` whose parameters are all frozen and with trainable parameters outside
``C``, one forward hook on ``M`` and ``C`` for that forward.  When ``M``'s output has ``C``'s output's shape
and differs from it by more than :data:`MIN_CHANGE` of its norm, ``M`` is run again (no_grad, the random
state and the buffers put back) with each of its trainable tensors set to zero in turn: a tensor whose
zeroing alone makes ``M``'s output exactly ``C``'s is a factor of an additive branch.  Two or more such
factors prove a multiplicative adapter branch on the frozen module that was not zero at the start; it is
reported at the next checked step or the end of the run, once an optimizer the session knows holds the
factors, when no such optimizer had stepped or held state for them at the probe (the branch had not trained).  Silent: a branch that starts at zero or near it, a single trainable tensor added
to a frozen output (a learned positional embedding or bias is not an adapter), scale-and-shift
(FiLM/IA3-style) parameters, a trainable head after a frozen body (zeroing it does not give the body's
output), adapters already trained (optimizer state present), outputs of another shape.

Widened (session 51, the wild corpus's w337): the frozen module may be reached through its bound ``forward`` kept
as an attribute (``self.org_forward = org.forward``: not a child, so no hook sees it; it is then run on the
wrapper's input), and a wrapper whose branch starts switched off (zeroing any one of two or more trainable tensors
changes nothing) while its output is a constant ``k != 1`` times the frozen module's (:func:`_times`) is reported
too: the multiplier, scale or dropout meant for the branch is applied to the frozen output as well, so the adapted
model does not start as the pretrained one and switching the adapter off (multiplier 0) removes the base model.
A nonlinearity after the sum (``gelu(base(x) + branch)``) is not a multiple of the frozen output: not judged.
"""

from __future__ import annotations

import weakref
from types import MethodType
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call

from overt.guards.check import Check
from overt.guards.probeargs import fresh
from overt.guards.putback import restore_buffers, save_buffers
from overt.guards.where import class_location, class_source, is_user_file, short_location, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

MIN_CHANGE = 0.05  # the branch's share of the frozen output's norm at the first forward
MAX_MODULES = 16  # wrappers probed per model
MAX_FACTORS = 8  # trainable tensors of one wrapper zeroed in turn
EXACT = 1e-6
PROPORTIONAL = 1e-5  # relative misfit of "the wrapper's output with its branch off is k times the frozen one's"
EARLY = 8  # a model is probed at one of its first forwards (counted from when it is watched)
MAX_SNAPSHOT = 1 << 23  # elements of initial values kept, over the run


def _frozen(c: Any) -> bool:
    ps = list(c.parameters()) if isinstance(c, nn.Module) else []
    return bool(ps) and not any(p.requires_grad for p in ps)


def _frozen_child(m: nn.Module) -> tuple[nn.Module, bool] | None:
    """A child of ``m`` whose parameters are all frozen, or a frozen module whose bound ``forward`` ``m`` keeps as
    an attribute (``self.org_forward = org.forward``: the wrapped module called without being a child); with
    whether it is reached through that method."""
    for c in m.children():
        if _frozen(c):
            return c, False
    for v in m.__dict__.values():
        if type(v) is MethodType and v.__name__ == "forward" and isinstance(v.__self__, nn.Module) \
                and v.__self__ is not m and _frozen(v.__self__):
            return v.__self__, True
    return None


def _candidates(root: nn.Module) -> list[tuple[nn.Module, nn.Module, bool, list[tuple[str, nn.Parameter]]]]:
    out = []
    for m in root.modules():
        found = _frozen_child(m)
        if found is None:
            continue
        c, by_method = found
        inner = {id(p) for p in c.parameters()}
        factors = [(n, p) for n, p in m.named_parameters() if p.requires_grad and id(p) not in inner
                   and p.is_floating_point() and p.numel() > 0]
        if factors and len(factors) <= MAX_FACTORS:
            out.append((m, c, by_method, factors))
        if len(out) >= MAX_MODULES:
            break
    return out


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / (b.float().norm() + 1e-12))


def _times(z: torch.Tensor, c: torch.Tensor) -> float | None:
    """``k`` where ``z`` is ``k`` times ``c`` on every element (within :data:`PROPORTIONAL`) and ``k`` is not 1
    (beyond :data:`MIN_CHANGE`), else None."""
    z, c = z.float(), c.float()
    denom = float((c * c).sum())
    if not denom > 0:
        return None
    k = float((z * c).sum()) / denom
    if abs(k - 1) <= MIN_CHANGE or float((z - k * c).norm()) > PROPORTIONAL * (float(c.norm()) * max(abs(k), 1.0)):
        return None
    return k


class AdapterInitChecks(Check):
    name = "adapterinit"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked: set[int] = set()  # id(model) probed
        self.handles: list[Any] = []
        self.pending: list[tuple[str, list[tuple[str, nn.Parameter]], float, str]] = []
        self.held_before: dict[int, Any] = {}  # id(tensor) -> weakref: held by an optimizer built earlier
        self.snapshot: dict[int, tuple[Any, torch.Tensor]] = {}  # id(tensor) -> (weakref, value when first held)
        self.snapshot_size = 0

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if info.forwards > EARLY or id(info.module) in self.looked:
            return
        self.looked.add(id(info.module))
        where = user_location(1) or info.name
        cands = _candidates(info.module)
        probed = {id(p) for _, _, _, factors in cands for _, p in factors}
        for p in info.module.parameters():  # initial values kept only for the factors about to be probed
            if id(p) not in probed and self.snapshot.pop(id(p), None) is not None:
                self.snapshot_size -= p.numel()
        self.remove_hooks()  # hooks of an earlier model whose wrapper never ran
        for m, c, by_method, factors in cands:
            seen: dict[str, Any] = {"by_method": c} if by_method else {}
            handles: list[Any] = []
            if not by_method:
                handles.append(c.register_forward_hook(self._inner(seen)))
            handles.append(m.register_forward_hook(self._outer(info, m, c, factors, seen, where, handles),
                                                   with_kwargs=True, always_call=True))
            self.handles += handles

    @staticmethod
    def _inner(seen: dict):
        def hook(module: nn.Module, args: tuple, output: Any) -> None:
            if "out" not in seen or seen.get("again"):
                seen["out"] = output
        return hook

    def _outer(self, info: ModelInfo, m: nn.Module, c: nn.Module, factors: list, seen: dict, where: str,
               handles: list):
        done = [False]

        def hook(module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
            if done[0]:
                return
            done[0] = True
            try:
                self._probe(info, m, factors, args, kwargs, output, seen, where)
            except Exception as exc:  # noqa: BLE001  a guard never breaks the user's forward
                self.s.check_failed(self, exc)
            finally:
                for h in handles:  # one forward looked at: no hook stays on the model
                    h.remove()
                seen.clear()
                seen["done"] = True
                for _, p in factors:  # probed once: its initial values are no longer needed
                    if self.snapshot.pop(id(p), None) is not None:
                        self.snapshot_size -= p.numel()

        return hook

    def built(self, opt: Any) -> None:
        """``Optimizer.__init__`` returned (patched in :mod:`overt.guards.patches`): the trainable tensors of an
        optimizer that no earlier optimizer held are at their initial values; a copy is kept (small sets only)."""
        params = [p for g in opt.param_groups for p in g["params"]
                  if isinstance(p, torch.Tensor) and p.requires_grad and p.is_floating_point()]
        fresh = [p for p in params if self.held_before.get(id(p), lambda: None)() is not p]
        for p in params:
            self.held_before[id(p)] = weakref.ref(p)
        if fresh and sum(p.numel() for p in fresh) <= MAX_SNAPSHOT - self.snapshot_size:
            for p in fresh:
                self.snapshot[id(p)] = (weakref.ref(p), p.detach().clone())
                self.snapshot_size += p.numel()

    def _initial(self, factors: list) -> dict[str, torch.Tensor] | None:
        """The factors' values before any training: their copies from the first optimizer built over them, or
        (None) their current values when no optimizer the session knows has stepped them; else no proof."""
        kept = [self.snapshot.get(id(p)) for _, p in factors]
        if all(k is not None and k[0]() is p for k, (_, p) in zip(kept, factors)):
            return {n: k[1] for k, (n, _) in zip(kept, factors)}
        for oi in self.s.optimizers.values():
            held = {id(p) for p in oi.params}
            if any(id(p) in held for _, p in factors) and (oi.steps or any(oi.opt.state.get(p) for _, p in factors)):
                raise LookupError  # trained before this forward: the branch may have moved on purpose
        return None

    def _probe(self, info: ModelInfo, m: nn.Module, factors: list, args: tuple, kwargs: dict, output: Any,
               seen: dict, where: str) -> None:
        owner = seen.get("by_method")  # the frozen module, called through its bound forward (no hook sees it)
        base = seen.get("out") if owner is None else output
        if not isinstance(output, torch.Tensor) or not isinstance(base, torch.Tensor) \
                or output.shape != base.shape or not output.is_floating_point():
            return
        try:
            init = self._initial(factors)
        except LookupError:
            return
        rng = torch.get_rng_state()
        cuda = output.device.type == "cuda"
        cuda_rng = torch.cuda.get_rng_state(output.device) if cuda else None
        buffers = save_buffers([m] if owner is None else [m, owner])

        def reset() -> None:
            torch.set_rng_state(rng)
            if cuda:
                torch.cuda.set_rng_state(cuda_rng, output.device)

        def run(values: dict[str, torch.Tensor]) -> tuple[Any, Any]:
            """``m`` on the same inputs with ``values`` in place of its tensors for this call only (the user's
            tensors are never written), the random state as it was: (its output, the frozen module's)."""
            reset()
            seen["again"] = True
            seen.pop("out", None)
            try:
                return functional_call(m, values, fresh(args), fresh(kwargs)), (seen.get("out") if owner is None else frozen)
            finally:
                seen["again"] = False

        gates, offs = [], []
        try:
            with torch.no_grad():
                frozen = None
                if owner is not None:  # the frozen module on the wrapper's input, as the wrapper calls it
                    reset()
                    frozen = owner.forward(*fresh(args), **fresh(kwargs))
                    if not isinstance(frozen, torch.Tensor) or frozen.shape != output.shape:
                        return
                if init is None:
                    z0, c_out = output.detach(), (base.detach() if owner is None else frozen)
                else:
                    z0, c_out = run(init)
                if not isinstance(z0, torch.Tensor) or not isinstance(c_out, torch.Tensor) or z0.shape != c_out.shape:
                    return
                change = _rel(z0, c_out)
                if not change > MIN_CHANGE:
                    return
                for name, p in factors:
                    values = dict(init or {})
                    values[name] = torch.zeros_like(p)
                    z, c_out = run(values)
                    if isinstance(z, torch.Tensor) and isinstance(c_out, torch.Tensor) and z.shape == c_out.shape:
                        if _rel(z, c_out) <= EXACT:
                            gates.append((name, p))
                        elif _rel(z, z0) <= EXACT:
                            offs.append((name, p))
                scale = _times(z0, c_out) if len(gates) < 2 and len(offs) >= 2 else None
        except Exception:  # noqa: BLE001  a forward that cannot run again: nothing proved
            return
        finally:
            reset()
            restore_buffers(buffers)
        label = f"{info.label(m)} ({type(m).__name__})"
        if len(gates) >= 2:
            found = class_source(m)  # the fix is in the wrapper's own code: name its class where it is the user's
            if found and is_user_file(found[0]):
                where = class_location(m) or where
            self.pending.append((label, gates, change, where, None))
        elif scale is not None:
            code = getattr(getattr(type(m), "forward", None), "__code__", None)
            if code is not None and is_user_file(code.co_filename):
                where = short_location(code.co_filename, code.co_firstlineno)
            self.pending.append((label, offs, change, where, scale))

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if self.pending:
            self._judge()

    def end_of_run(self) -> None:
        self._judge()

    def _judge(self) -> None:
        """Report the branches an optimizer the session knows trains (the adapter is being fine-tuned)."""
        if not self.pending:
            return
        held = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
        left = []
        for label, gates, change, where, scale in self.pending:
            if not any(id(p) in held for _, p in gates):
                left.append((label, gates, change, where, scale))
                continue
            names = [n for n, _ in gates]
            if scale is not None:
                self._report_scaled(label, names, scale, where)
                continue
            self.s.report(
                "adapter-not-identity-at-init",
                f"{label} adds a trainable branch to the output of a frozen module, and the branch is not zero "
                f"before the first step: it changes that module's output by {change:.0%} of its norm (zeroing "
                f"any one of {', '.join(names)} alone gives the frozen module's output exactly, so they are "
                "factors of one added branch, and none of them starts at zero). The adapted model does not start "
                "as the pretrained one: every adapted layer is perturbed at step 0, and fine-tuning spends its "
                "steps undoing the perturbation instead of adapting.",
                fix=f"initialise one factor of the branch at zero (LoRA: nn.init.zeros_ on B, the factor applied "
                f"last, with A random; an adapter: its up-projection), so {label} starts exactly as the frozen "
                "module and only training moves it.",
                where=where, key=where)
        self.pending = left

    def _report_scaled(self, label: str, names: list[str], scale: float, where: str) -> None:
        self.s.report(
            "adapter-not-identity-at-init",
            f"{label} wraps a frozen module and adds a trainable branch that starts switched off (zeroing any one "
            f"of {', '.join(names)} changes nothing: the branch is zero before the first step), yet its output "
            f"is {scale:.3g} times the frozen module's output, not that output: the wrapper scales the frozen "
            "module's own output along with the branch (a multiplier, a scale or a dropout applied to the sum "
            "instead of to the branch alone). The adapted model does not start as the pretrained one, and "
            "switching the adapter off (multiplier 0) or weakening it does not give the pretrained model back.",
            fix="apply the adapter's multiplier, scale and dropout to the branch only: "
                "return base(x) + dropout(up(down(x))) * multiplier * scale, so that the wrapper with its "
                "branch at zero returns the frozen module's output exactly.",
            where=where, key=where)

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
