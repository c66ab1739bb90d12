"""Guard on a term of the loss that is constant in the parameters it reaches (slug ``loss-term-constant``;
issue 33, the wild corpus's w364).

An invariant of every loss made of several terms: each term is there to move the parameters, so each
term's own gradient on the parameters it reaches is, at some point of training, a real share of the
loss's gradient.  A term that is constant by its algebra -- a load-balancing loss whose broadcast
product always sums to the number of experts, a penalty on a quantity that is normalised before the
penalty sees it (a sum of probabilities, the mean of a batch-normalised output), a product of two
factors that cancel -- still has a graph that reaches the parameters, so nothing raises and the total
loss looks normal, but its gradient is zero up to rounding: whatever it was written to encourage (a
balance, a regularisation, an auxiliary task) never happens.

What is proved, on checked training steps only (:mod:`overt.guards.termscale`'s wrapper of
``torch.autograd.backward`` hands it the root before the user's backward runs): the root is split into
its additive terms (:func:`overt.guards.termscale.additive_terms`: ``+``, ``-``, unary minus and constant
factors); with two to :data:`MAX_TERMS` terms, none reachable from another's graph, each term's
gradient on the parameters the watched optimizers hold is computed alone (``torch.autograd.grad`` of the
root with ``retain_graph=True``, the other terms' incoming gradients replaced by zeros through node
pre-hooks), its norm divided by its weight in the sum and compared with the largest other term's (so a
small coefficient is the user's choice, not a constant).  A term whose gradient is *non-zero* and at most
:data:`REL` of another term's -- rounding left over from a cancellation -- on :data:`SAME` probes over at
least :data:`SPAN` optimizer steps, never more on any probe, and whose direction does not stay put from
probe to probe (a small real gradient, such as a weak penalty averaged over the weights of a very large
layer, points the same way at every probe: the cosine of a sample of its coordinates with the previous
probe's above :data:`SAME_DIRECTION` every time), is reported at the backward's line.  A gradient that is exactly zero
proves nothing (a hinge whose margins all hold, free bits below their floor, a penalty at its clamp:
saturated by design) and neither counts for nor against; a term seen once with a real share of the
gradient silences its site for good, and a site whose terms are all seen live is not probed again.

Silent (nothing probed): a distributed process group (a backward of its own would run the gradient
hooks of data-parallel wrappers), any module backward hook of a watched model or a global one, a
parameter with a gradient hook that is not the guards' own, a tensor hook registered by the program's
code during the checked step (``Tensor.register_hook`` from the user's files: it would run once more
per term), a compiled graph, a root whose terms share nodes, a loss whose gradient is not finite.
Not put back: a Python side effect inside a user-written ``autograd.Function.backward`` (it runs once
more per term on a probed step, as under ``custom-backward-not-linear``'s probe).
"""

from __future__ import annotations

import functools
import inspect
import math
import sys
from typing import TYPE_CHECKING, Any

import torch

from overt.guards import probing
from overt.guards.check import Check
from overt.guards.termscale import _COMBINING, additive_terms, reduction
from overt.guards.watched import output_tensors
from overt.guards.where import is_user_file, short_location, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

REL = 1e-6  # a term's gradient norm over the largest other term's (each divided by its weight in the sum) at and
# below which it is rounding
SAME_DIRECTION = 0.9  # cosine of a term's gradient with its previous probe's above which the direction is kept
SAMPLE = 2048  # gradient coordinates kept per term between probes
SAME = 3  # probes on which a term's gradient is rounding
SPAN = 20  # optimizer steps the probes must cover: a stationary point at the start is not a constant
MAX_TERMS = 6  # additive terms probed (one backward each)
MAX_SITES = 4  # backward lines followed over the run
MAX_PROBES = 8  # probed backwards per site
MAX_NODES = 20000  # autograd nodes walked per term
MAX_OUTPUTS = 32  # model outputs of a step remembered

_ORIG_REGISTER: Any = None
_USER_HOOK_STEP: dict[int, int] = {}  # id(session) -> its step when the program's code last registered a tensor hook


class _Site:
    __slots__ = ("dead", "live", "probes", "done", "samples")

    def __init__(self) -> None:
        self.dead: dict[int, list[tuple[int, float, float]]] = {}  # term -> (step, relative norm, cosine) probes
        self.live: set[int] = set()  # term indices seen with a real share of the gradient
        self.probes = 0
        self.done = False
        self.samples: dict[int, torch.Tensor] = {}  # term index -> its gradient's sampled coordinates, last probe


class DeadTermChecks(Check):
    name = "deadterm"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.sites: dict[str, _Site] = {}
        self.outputs: dict[int, tuple[Any, str, int, type]] = {}  # id(grad_fn) -> (it, model, output index, class)
        self.at = -1

    # -- what the step's forwards returned (named in a finding) -----------------------------------
    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if failed or not self.s.armed or not torch.is_grad_enabled() or all(s.done for s in self.sites.values()) \
                and len(self.sites) >= MAX_SITES:
            return
        if self.at != self.s.step:
            self.outputs.clear()
            self.at = self.s.step
        if len(self.outputs) >= MAX_OUTPUTS:
            return
        tensors = output_tensors(output)
        for k, t in enumerate(tensors):
            fn = t.grad_fn
            if fn is not None:
                self.outputs[id(fn)] = (fn, info.name, k if len(tensors) > 1 else -1, type(info.module))

    def after_checked_step(self, oi: OptInfo) -> None:
        self.outputs.clear()

    def remove_hooks(self) -> None:
        self.outputs.clear()
        _USER_HOOK_STEP.pop(id(self.s), None)  # a later session may get this one's id

    # -- the backward of a checked step ----------------------------------------------------------
    def on_backward(self, tensors: Any) -> None:
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        if not isinstance(tensors, torch.Tensor) or tensors.numel() != 1:
            return
        root = tensors.grad_fn
        if root is None or type(root).__name__ not in _COMBINING:
            return
        loc = user_location(2) or "the backward call"
        site = self.sites.get(loc)
        if site is None:
            if len(self.sites) >= MAX_SITES:
                return
            site = self.sites[loc] = _Site()
        if site.done or site.probes >= MAX_PROBES or not self._may_probe():
            return
        terms = additive_terms(root)
        if terms is None:
            site.done = True  # more terms than followed: not this check's loss
            return
        terms = [t for t in terms if t.coef != 0]
        if not 2 <= len(terms) <= MAX_TERMS or len({id(t.node) for t in terms}) != len(terms):
            return
        held = {id(p): p for oi in self.s.optimizers.values() for p in oi.params if p.requires_grad}
        reach: list[set[int]] = []
        nodes = {id(t.node) for t in terms}
        for t in terms:
            leaves = _leaves(t.node, nodes)
            if leaves is None:
                return  # a term inside another's graph, a compiled graph, or too large a graph
            reach.append(leaves & held.keys())
        params = [held[i] for i in sorted(set().union(*reach), key=list(held).index)]
        if not params or not self._hooks_clear(params):
            return
        probe = self._probe(tensors, terms, params, site)
        if probe is None:
            return
        site.probes += 1
        self._judge(site, loc, terms, *probe)

    def _may_probe(self) -> bool:
        if _USER_HOOK_STEP.get(id(self.s)) == self.s.step:
            return False
        dist = torch.distributed
        if dist.is_available() and dist.is_initialized():
            return False
        mod = torch.nn.modules.module
        if getattr(mod, "_global_backward_hooks", None) or getattr(mod, "_global_backward_pre_hooks", None):
            return False
        for info in self.s.models.values():
            for m in info.module.modules():
                if m._backward_hooks or m._backward_pre_hooks:
                    return False
        return True

    def _hooks_clear(self, params: list[torch.Tensor]) -> bool:
        """No gradient hook on the parameters but the guards' own (``grads``' per-parameter hook)."""
        grads = getattr(self.s, "grads", None)
        ours = {h.id for hs in getattr(grads, "hooks", {}).values() for h in hs}
        for p in params:
            hooks = getattr(p, "_backward_hooks", None)
            if hooks and any(k not in ours for k in hooks):
                return False
        return True

    def _probe(self, root: torch.Tensor, terms: list, params: list[torch.Tensor],
               site: _Site) -> tuple[list[float], list[float]] | None:
        """Each term's own gradient norm on ``params`` (divided by its weight in the sum) and the cosine of its
        sampled coordinates with the same term's at the site's previous probe (0 when there is none)."""
        norms, cosines = [], []
        with probing.active():
            for i, t in enumerate(terms):
                handles = [o.node.register_prehook(_zeros) for o in terms if o is not t]
                try:
                    grads = torch.autograd.grad(root, params, retain_graph=True, allow_unused=True)
                except Exception:  # noqa: BLE001  a graph that cannot be backwarded twice: nothing proved
                    return None
                finally:
                    for h in handles:
                        h.remove()
                grads = [g.detach().float() for g in grads if g is not None]
                if not grads:
                    norms.append(torch.zeros(()))
                    cosines.append(torch.zeros(()))
                    continue
                norms.append(torch.stack([g.pow(2).sum() for g in grads]).sum().sqrt() / abs(t.coef))
                sample = _sample(grads)
                sample = sample / sample.abs().max().clamp_min(1e-30)  # unit scale: the cosine of tiny gradients
                before = site.samples.get(i)
                site.samples[i] = sample
                cosines.append(torch.nn.functional.cosine_similarity(sample, before, dim=0)
                               if before is not None and before.shape == sample.shape else torch.zeros(()))
        values = torch.stack(norms + cosines).tolist()  # one read of the device per probed step (checked steps)
        if not all(math.isfinite(v) for v in values):
            return None
        return values[:len(terms)], values[len(terms):]

    def _judge(self, site: _Site, loc: str, terms: list, norms: list[float], cosines: list[float]) -> None:
        step = self.s.step
        for i, n in enumerate(norms):
            if i in site.live:
                continue
            top = max(v for j, v in enumerate(norms) if j != i)
            if top <= 0 or n == 0:
                continue  # nothing to compare with, or saturated: proves nothing
            rel = n / top
            if rel > REL:
                site.live.add(i)  # a real share of the gradient
                site.dead.pop(i, None)
                continue
            seen = site.dead.setdefault(i, [])
            if not seen or seen[-1][0] != step:
                seen.append((step, rel, cosines[i]))
        if len(site.live) == len(norms):
            site.done = True
            site.samples.clear()
            return
        for i, seen in site.dead.items():
            if len(seen) >= SAME and seen[-1][0] - seen[0][0] >= SPAN:
                if all(c > SAME_DIRECTION for _, _, c in seen[1:]):
                    site.live.add(i)  # a small gradient that keeps its direction: a signal, not rounding
                    site.dead.pop(i)
                    return
                site.done = True
                site.samples.clear()
                self._report(loc, terms, i, seen, norms)
                return

    def _report(self, loc: str, terms: list, i: int, seen: list[tuple[int, float, float]], norms: list[float]) -> None:
        t = terms[i]
        r = reduction(t.node)
        what = (f"{'a mean' if r[0] == 'mean' else 'a sum'} over a {'x'.join(str(n) for n in r[1]) or 'scalar'} "
                "tensor" if r is not None else f"a term ending in {type(t.node).__name__}")
        steps = ", ".join(str(s) for s, _, _ in seen[:6])
        out = self._output_of(t.node)
        if out is not None:
            name, k, fwd = out
            at = f" at {fwd}" if fwd else ""
            what += f" (the output of {name}'s forward{at})" if k < 0 else f" (output {k} of {name}'s forward{at})"
        worst = max(v for _, v, _ in seen)
        msg = (f"The loss backwarded at {loc} adds {len(terms)} terms, and one of them -- {what}, entering the sum "
               f"with weight {t.coef:.3g} -- is constant in the parameters it reaches: its own gradient on them is "
               f"at most {worst:.1e} of another term's at steps {steps} (rounding, not a signal). Its graph reaches "
               "the model, so nothing raises and the total loss looks normal, but the term moves no weight: whatever "
               "it was written to encourage (a balance between experts, a regularisation, an auxiliary task) does "
               "not happen. A term of this kind is usually constant by its algebra: a quantity normalised before "
               "the term sees it (weights renormalised to sum to one, probabilities summed), a product broadcast "
               "over the wrong axes and summed, two factors that cancel.")
        fix = ("compute the term from the quantity it is meant to steer and check that it can change: e.g. "
               "torch.autograd.grad(term, model.parameters(), retain_graph=True) must not be ~0; for a load-balancing "
               "loss multiply each expert's routed fraction by that expert's mean router probability "
               "(E * (fraction * probs.mean(0)).sum(), both of shape [E]).")
        self.s.report("loss-term-constant", msg, where=loc, fix=fix, key=loc)

    def _output_of(self, node: Any) -> tuple[str, int, str] | None:
        """(model, output index, its forward's location) when ``node`` is, up to constant factors, a watched
        model's output of this step."""
        for fn, name, k, cls in self.outputs.values():
            terms = additive_terms(fn) if fn is not node else None
            if fn is node or terms is not None and len(terms) == 1 and terms[0].node is node:
                code = getattr(inspect.unwrap(cls.forward), "__code__", None)
                return name, k, short_location(code.co_filename, code.co_firstlineno) if code is not None else ""
        return None


def _sample(grads: list[torch.Tensor]) -> torch.Tensor:
    """The first coordinates of each gradient, :data:`SAMPLE` in all: enough to tell a direction kept from
    step to step (a small real gradient) from rounding, whose direction changes with every batch."""
    out, left = [], SAMPLE
    per = max(1, SAMPLE // len(grads))
    for g in grads:
        take = min(per, left, g.numel())
        out.append(g.reshape(-1)[:take])
        left -= take
        if left <= 0:
            break
    return torch.cat(out)


def _zeros(grad_outputs: tuple) -> tuple:
    return tuple(None if g is None else torch.zeros_like(g) for g in grad_outputs)


def _leaves(node: Any, terms: set[int]) -> set[int] | None:
    """The ids of the leaf tensors ``node``'s graph reaches; None when it reaches another term's node, a
    compiled graph, or more than :data:`MAX_NODES` nodes."""
    seen = {node}
    todo = [node]
    out: set[int] = set()
    while todo:
        if len(seen) > MAX_NODES:
            return None
        fn = todo.pop()
        if fn is not node and id(fn) in terms:
            return None
        if "Compiled" in type(fn).__name__:
            return None
        var = getattr(fn, "variable", None)
        if var is not None:
            out.add(id(var))
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return out


def _register_wrapper(orig: Any) -> Any:
    @functools.wraps(orig)
    def register_hook(self: torch.Tensor, hook: Any) -> Any:
        try:
            from overt.guards import patches

            if patches.ARMED and is_user_file(sys._getframe(1).f_code.co_filename):
                for s in patches.ACTIVE:
                    _USER_HOOK_STEP[id(s)] = s.step
        except Exception:  # noqa: BLE001  never in the way of the user's hook
            pass
        return orig(self, hook)

    return register_hook


def install(patch: Any) -> None:
    """Note the checked steps on which the program's code registers a tensor hook (``Tensor.register_hook``)."""
    patch(torch.Tensor, "register_hook", _register_wrapper)
