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
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn
from torch.func import functional_call

from overt.guards.check import Check
from overt.guards.putback import restore_buffers, save_buffers
from overt.guards.where import class_location, class_source, is_user_file, user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

MIN_CHANGE = 0.05  # the branch's share of the frozen output's norm at the first forward
MAX_MODULES = 16  # wrappers probed per model
MAX_FACTORS = 8  # trainable tensors of one wrapper zeroed in turn
EXACT = 1e-6
EARLY = 8  # a model is probed at one of its first forwards (counted from when it is watched)
MAX_SNAPSHOT = 1 << 23  # elements of initial values kept, over the run


def _frozen_child(m: nn.Module) -> nn.Module | None:
    for c in m.children():
        ps = list(c.parameters())
        if ps and not any(p.requires_grad for p in ps):
            return c
    return None


def _candidates(root: nn.Module) -> list[tuple[nn.Module, nn.Module, list[tuple[str, nn.Parameter]]]]:
    out = []
    for m in root.modules():
        c = _frozen_child(m)
        if c is None:
            continue
        inner = {id(p) for p in c.parameters()}
        factors = [(n, p) for n, p in m.named_parameters() if p.requires_grad and id(p) not in inner
                   and p.is_floating_point() and p.numel() > 0]
        if factors and len(factors) <= MAX_FACTORS:
            out.append((m, c, factors))
        if len(out) >= MAX_MODULES:
            break
    return out


def _rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a.float() - b.float()).norm() / (b.float().norm() + 1e-12))


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
        probed = {id(p) for _, _, factors in cands for _, p in factors}
        for p in info.module.parameters():  # initial values kept only for the factors about to be probed
            if id(p) not in probed and self.snapshot.pop(id(p), None) is not None:
                self.snapshot_size -= p.numel()
        self.remove_hooks()  # hooks of an earlier model whose wrapper never ran
        for m, c, factors in cands:
            seen: dict[str, Any] = {}
            handles: list[Any] = []
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
        base = seen.get("out")
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
        buffers = save_buffers([m])

        def run(values: dict[str, torch.Tensor]) -> tuple[Any, Any]:
            """``m`` on the same inputs with ``values`` in place of its tensors for this call only (the user's
            tensors are never written), the random state as it was: (its output, the frozen module's)."""
            torch.set_rng_state(rng)
            if cuda:
                torch.cuda.set_rng_state(cuda_rng, output.device)
            seen["again"] = True
            seen.pop("out", None)
            try:
                return functional_call(m, values, args, kwargs), seen.get("out")
            finally:
                seen["again"] = False

        gates = []
        try:
            with torch.no_grad():
                if init is None:
                    z, c_out = output.detach(), base.detach()
                else:
                    z, c_out = run(init)
                if not isinstance(z, torch.Tensor) or not isinstance(c_out, torch.Tensor) or z.shape != c_out.shape:
                    return
                change = _rel(z, c_out)
                if not change > MIN_CHANGE:
                    return
                for name, p in factors:
                    values = dict(init or {})
                    values[name] = torch.zeros_like(p)
                    z, c_out = run(values)
                    if isinstance(z, torch.Tensor) and isinstance(c_out, torch.Tensor) and z.shape == c_out.shape \
                            and _rel(z, c_out) <= EXACT:
                        gates.append((name, p))
        except Exception:  # noqa: BLE001  a forward that cannot run again: nothing proved
            return
        finally:
            torch.set_rng_state(rng)
            if cuda:
                torch.cuda.set_rng_state(cuda_rng, output.device)
            restore_buffers(buffers)
        if len(gates) >= 2:
            found = class_source(m)  # the fix is in the wrapper's own code: name its class where it is the user's
            if found and is_user_file(found[0]):
                where = class_location(m) or where
            self.pending.append((f"{info.label(m)} ({type(m).__name__})", gates, change, where))

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
        for label, gates, change, where in self.pending:
            if not any(id(p) in held for _, p in gates):
                left.append((label, gates, change, where))
                continue
            names = [n for n, _ in gates]
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

    def remove_hooks(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []
