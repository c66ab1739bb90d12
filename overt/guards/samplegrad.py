"""Guard on a sample drawn without gradient where its gradient is needed (slug ``sample-not-reparameterised``,
issue 33, the wild corpus's w366).

The premise: a value a program draws from a distribution whose parameters it trains, and then feeds to a trained
layer whose loss it minimises, carries the gradient of that loss back to the distribution's parameters -- the
reparameterisation the distribution offers (``rsample()``: ``loc + scale * eps``).  ``sample()`` draws under
``no_grad``: the draw is a constant to autograd, so the layers after it train while the parameters before it (a
VAE's encoder, a policy's mean and spread) receive nothing from that loss, only from whatever other term reads them
(the KL), and the posterior collapses onto the prior (pyro-ppl/pyro#1896: a VAE sampling its latent with
``.sample()``).  The score-function estimator is the one correct use of ``sample()`` on trained parameters:
REINFORCE puts ``log_prob`` of the sample into the loss, which carries the gradient instead.

What is proven, on at most :data:`MAX_WINDOWS` checked steps (the forwards of a step whose optimizer step is
checked, until that step; no work on any other step): while such a step lasts, the ``sample`` methods of every
``torch.distributions`` class are wrapped; from the step's first draw of the kind below, their ``log_prob`` methods
too, and a global forward pre-hook watches module calls (before that draw there is nothing for them to see).
A draw by ``sample()`` (the outermost one: a ``sample`` that calls another counts once) from a distribution that
offers ``rsample`` and whose parameter tensors require gradients, under autograd, is followed by identity: when
it is passed, the tensor itself, as an argument to a module, and it is never passed to a ``log_prob``.  At the
checked step, gradients final, it is reported when that module has trainable parameters and some of them
received a gradient (the loss reached the layer the draw feeds).  Silent on REINFORCE and its kin (``log_prob``
of the draw), on draws from distributions with fixed parameters (noise, priors), on draws made under
``no_grad`` (targets, rollouts), on distributions without ``rsample`` (categorical tokens), and on draws that feed
no trained layer (an environment's action).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from torch import distributions as D
from torch import nn
from torch.nn.modules.module import register_module_forward_pre_hook

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo, OptInfo

SLUG = "sample-not-reparameterised"
MAX_WINDOWS = 3
MAX_DRAWS = 16


def _classes() -> list[type]:
    """``Distribution`` and every subclass of it (a class reached twice, through two bases, listed twice)."""
    out = [D.Distribution]
    for c in out:  # (the list grows as it is walked: every class's subclasses are visited in turn)
        out += c.__subclasses__()
    return out


def _trained_params(dist: Any, depth: int = 0) -> list[str]:
    """The names of ``dist``'s parameter tensors (its own attributes, and its base distribution's) that require
    gradients and come from a computation."""
    names = []
    for k, v in list(vars(dist).items()):
        if isinstance(v, torch.Tensor) and v.requires_grad and v.grad_fn is not None:
            names.append(k)
        elif depth < 3 and isinstance(v, D.Distribution):
            names.extend(f"{k}.{n}" for n in _trained_params(v, depth + 1))
    return names


class _Draw:
    __slots__ = ("value", "dist", "params", "line", "fed", "scored")

    def __init__(self, value: torch.Tensor, dist: Any, params: list[str], line: str | None):
        self.value, self.dist, self.params, self.line = value, dist, params, line
        self.fed: list[nn.Module] = []
        self.scored = False


class SampleGradChecks(Check):
    name = "samplegrad"

    def __init__(self, session: Any):
        super().__init__(session)
        self.windows = 0
        self.open = False
        self.swapped: list[tuple[type, str, Any]] = []
        self.classes: list[type] = []  # the distribution classes of the open window
        self.handle: Any = None
        self.draws: list[_Draw] = []
        self.depth = 0

    # -- the window: a checked step's forwards --------------------------------------------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.open or self.windows >= MAX_WINDOWS or not self.s.armed:
            return
        self.windows += 1
        self.open = True
        self.classes = _classes()
        self._swap("sample", self._wrap_sample)

    def _swap(self, meth: str, wrap: Any) -> None:
        """Wrap ``meth`` on every distribution class that defines it."""
        for cls in self.classes:
            own = cls.__dict__
            if meth in own:
                orig = own[meth]
                if orig is not None and callable(orig):
                    self.swapped.append((cls, meth, orig))
                    setattr(cls, meth, wrap(orig))

    def _first_draw(self) -> None:
        """The window's first draw: from now on its ``log_prob`` calls and the module calls it is passed to are
        watched (before it, no draw could be scored or fed)."""
        self._swap("log_prob", self._wrap_log_prob)
        self.handle = register_module_forward_pre_hook(self._fed)

    def _wrap_sample(self, orig: Any):
        check = self

        def sample(dist: Any, *args: Any, **kwargs: Any) -> Any:
            check.depth += 1
            try:
                out = orig(dist, *args, **kwargs)
            finally:
                check.depth -= 1
            if check.depth == 0 and torch.is_grad_enabled() and isinstance(out, torch.Tensor) \
                    and out.is_floating_point() and len(check.draws) < MAX_DRAWS:
                try:
                    rs = bool(dist.has_rsample)
                except Exception:
                    rs = False
                params = _trained_params(dist) if rs else []
                if params and not out.requires_grad:
                    if not check.draws:
                        check._first_draw()
                    check.draws.append(_Draw(out, dist, params, user_location(2)))
            return out
        return sample

    def _wrap_log_prob(self, orig: Any):
        check = self

        def log_prob(dist: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
            for d in check.draws:
                if d.value is value:
                    d.scored = True
            return orig(dist, value, *args, **kwargs)
        return log_prob

    def _fed(self, module: nn.Module, args: tuple) -> None:
        if not self.draws:
            return
        for a in args:
            if isinstance(a, torch.Tensor):
                for d in self.draws:
                    if d.value is a and module not in d.fed and len(d.fed) < 8:
                        d.fed.append(module)

    def _close(self) -> list[_Draw]:
        for cls, meth, orig in reversed(self.swapped):
            setattr(cls, meth, orig)
        self.swapped = []
        self.classes = []
        if self.handle is not None:
            self.handle.remove()
            self.handle = None
        self.open = False
        draws, self.draws = self.draws, []
        return draws

    # -- the checked step: gradients are final ----------------------------------------------------------------
    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if not self.open:
            return
        for d in self._close():
            if d.scored or not d.fed:
                continue
            layer = next((m for m in d.fed if any(p.requires_grad and p.grad is not None for p in m.parameters())),
                         None)
            if layer is not None:
                self._report(d, layer)

    def _report(self, d: _Draw, layer: nn.Module) -> None:
        dist = type(d.dist).__name__
        names = {}
        for info in self.s.models.values():
            for n, m in info.module.named_modules():
                names.setdefault(id(m), f"{info.name}.{n}" if n else info.name)
        label = f"{names[id(layer)]} ({type(layer).__name__})" if id(layer) in names else type(layer).__name__
        params = ", ".join(d.params[:4])
        msg = (f"a value drawn by {dist}.sample(){f' at {d.line}' if d.line else ''} is fed to {label}, which "
               f"trains on it (its parameters receive gradients), while the distribution's parameters ({params}) are "
               "computed by trained layers: sample() draws under no_grad, so the loss's gradient stops at the draw "
               "and never reaches the layers that computed the distribution (a VAE's encoder learns only from the KL "
               f"term, and the posterior collapses onto the prior). {dist} offers rsample(), the reparameterised "
               "draw (loc + scale * eps) that carries the gradient; no log_prob of the draw is computed, so this is "
               "not a score-function (REINFORCE) estimator either.")
        fix = f"draw with {dist}.rsample() (or compute loc + scale * torch.randn_like(scale) by hand)"
        self.s.report(SLUG, msg, where=d.line or label, fix=fix, key=f"draw:{d.line}:{dist}")

    def end_of_run(self) -> None:
        if self.open:
            self._close()

    def remove_hooks(self) -> None:
        if self.open:
            self._close()


__all__ = ["SampleGradChecks"]
