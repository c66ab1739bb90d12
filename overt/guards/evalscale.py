"""Guard on a random regulariser whose evaluation output is not its training output's expectation (slug
``eval-not-train-expectation``; issue 33, session 47: evaluation computes the expectation of what training
computed).

An invariant of every correct random regulariser (dropout, drop-path, stochastic depth, a custom dropout,
zero-mean noise): where a module's output differs between training and eval mode only through the random
numbers it draws, its eval-mode output is the expectation of its training-mode output.  Inverted dropout scales
the kept units by ``1/(1-p)`` in training and does nothing in evaluation; the original form keeps them as they
are and multiplies by ``1-p`` in evaluation; either way the two agree on average.  A keep probability never
applied in evaluation (an eval branch that is dead code), a dropout without ``1/(1-p)``, a dropout scaled twice
all break it: every layer after the module sees activations of another scale in evaluation than the ones it
was trained on, on average, and the evaluated network is not the trained one.

Looked at once per model, on its first checked training forward (no device work on any other step): the user's
own modules (a class defined in the user's files) record the input of their first call in that forward; after
the optimizer step, each is run again on that input under ``no_grad``, its submodules in eval mode so that only
the module's own random numbers vary (an ``nn.Dropout`` child is PyTorch's and is not judged here; a user
module nested inside is judged on its own), :data:`DRAWS` times with the module's ``training`` flag set and
twice with it cleared.  The module is judged only when its training-mode output is random (the draws differ),
its eval-mode output is not (the two eval passes agree, so Monte Carlo dropout kept on on purpose is left
alone), the shapes agree, and it holds no buffer of its own (running statistics differ between modes by
design), and its draws do not merely move the eval output's values to other positions per sample (a random flip
or permutation inside the model is an augmentation, not a regulariser).  A list, dict or set attribute a forward
appends to is put back too.  Per output element, ``t = (eval - mean of the draws) / spread of the draws``: for a
correct regulariser ``t`` is only the sampling error of the mean (about ``0.8/sqrt(DRAWS)`` in size); a module whose
evaluation misses a keep probability ``q`` sits ``sqrt((1-q)/q)`` spreads away on every element.  The eval
output must also be one that training mode produces, in range: on :data:`INSIDE` of the varying elements it lies
between the smallest and the largest draw (a module that returns another quantity in evaluation by design, such
as probabilities for logits, is not judged), or, outside that range, it is one constant times the draws' average on
every element (:func:`_scaled`: a dropout whose kept units are scaled by another factor than ``1/keep``, such as
the drop fraction, the wild corpus's w347: its eval output, the input, exceeds every draw).  A median ``|t|`` above :data:`LIMIT` is reported: a keep
probability missed at ``p >= 0.4``; correct modules whose output passes the random numbers through a nonlinearity
(a GELU, a softmax or a LayerNorm after a dropout in the same ``forward``) reach about 0.4, a dropout scaled
twice at most 0.5, so that one is not told apart and stays unreported.  The random generators, the buffers,
every module's attributes and training flags are put back afterwards: the user's run is unchanged.
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.probeargs import fresh
from overt.guards.rerun import rerun
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

DRAWS = 32  # training-mode passes averaged
LIMIT = 0.8  # median |eval - mean| / spread above which the eval output is not the expectation
MIN_RANDOM = 16  # output elements that vary between draws needed to judge
MAX_MODULES = 16  # user modules probed per model
MOVED = 0.2  # share of (draw, sample) pairs that only rearrange the eval output's values, above which not judged
INSIDE = 0.9  # share of the varying elements whose eval value lies within the draws' range, needed to judge
SCALED_FIT = 0.4  # median misfit (in spreads) of the draws' average to the eval output over one constant
SCALED_AWAY = 0.2  # that constant's distance from 1 needed to judge an eval output outside the draws' range


def _forward_code(m: nn.Module) -> Any:
    code = getattr(getattr(type(m), "forward", None), "__code__", None)
    return code if code is not None and is_user_file(code.co_filename) else None


def _first_float(value: Any) -> torch.Tensor | None:
    if isinstance(value, torch.Tensor):
        return value if value.is_floating_point() else None
    if isinstance(value, (list, tuple)):
        for v in value[:4]:
            t = _first_float(v)
            if t is not None:
                return t
    if isinstance(value, dict):
        for v in list(value.values())[:4]:
            t = _first_float(v)
            if t is not None:
                return t
    return None


def _plain(value: Any, depth: int = 0) -> bool:
    if value is None or isinstance(value, (torch.Tensor, bool, int, float, str)):
        return True
    if isinstance(value, (list, tuple)) and depth < 2:
        return len(value) <= 8 and all(_plain(v, depth + 1) for v in value)
    if isinstance(value, dict) and depth < 2:
        return len(value) <= 8 and all(_plain(v, depth + 1) for v in value.values())
    return False


def _rearranged(stack: torch.Tensor, ev: torch.Tensor, tol: float) -> bool:
    """Whether the training draws move the eval output's values to other positions (a random flip, roll or
    permutation inside the module: an augmentation, not a regulariser): per sample (dimension 0), a draw whose
    sorted values are the eval output's while its values in place are not, for more than :data:`MOVED` of the
    (draw, sample) pairs."""
    if ev.dim() < 2:
        return False
    draws = stack.reshape(stack.shape[0], ev.shape[0], -1)
    ref = ev.reshape(ev.shape[0], -1)
    same_sorted = ((draws.sort(-1).values - ref.sort(-1).values).abs() <= tol).all(-1)
    same_place = ((draws - ref).abs() <= tol).all(-1)
    return float((same_sorted & ~same_place).float().mean()) > MOVED


def _scaled(ev: torch.Tensor, mean: torch.Tensor, spread: torch.Tensor) -> float | None:
    """The factor ``k`` by which the eval output exceeds the training draws' average, where the average is the
    eval output times one constant (``mean = ev / k`` on every varying element, within :data:`SCALED_FIT` spreads
    at the median: a dropout whose kept units are scaled by another factor than ``1/keep``), else None (the eval
    output is another quantity: not judged)."""
    denom = float((mean * mean).sum())
    if denom <= 0:
        return None
    c = float((mean * ev).sum()) / denom  # least squares: ev ~ c * mean
    if not c > 0 or abs(c - 1) < SCALED_AWAY:
        return None
    fit = ((c * mean - ev).abs() / (c * spread)).median()
    return c if float(fit) <= SCALED_FIT else None


class _Contents:
    """The contents of the list, dict and set attributes of a module tree (a forward that appends to a
    cache or a log), put back in place after the probe."""

    def __init__(self, root: nn.Module):
        self.kept = [(v, list(v) if isinstance(v, list) else dict(v) if isinstance(v, dict) else set(v))
                     for m in root.modules() for k, v in vars(m).items()
                     if not k.startswith("_") and isinstance(v, (list, dict, set))]

    def restore(self) -> None:
        for obj, content in self.kept:
            if isinstance(obj, list):
                obj[:] = content
            else:
                obj.clear()
                obj.update(content)


class EvalScaleChecks(Check):
    name = "evalscale"

    def __init__(self, session: Any):
        super().__init__(session)
        self.done: set[int] = set()  # models looked at
        self.handles: list[Any] = []
        self.inputs: dict[int, tuple[nn.Module, tuple, dict]] = {}  # id(module) -> (module, args, kwargs)
        self.model: ModelInfo | None = None
        self.pending: ModelInfo | None = None  # a model whose recorded inputs wait for the step's end

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if id(info) in self.done or self.handles:
            return
        self.done.add(id(info))
        mods = [m for m in info.module.modules() if _forward_code(m) is not None
                and not list(m.buffers(recurse=False))][:MAX_MODULES]
        if not mods:
            return
        self.model = info
        for m in mods:
            self.handles.append(m.register_forward_hook(self._record, with_kwargs=True))

    def _record(self, module: nn.Module, args: tuple, kwargs: dict, output: Any) -> None:
        if id(module) in self.inputs or not module.training or not torch.is_grad_enabled():
            return
        if _first_float(output) is None or not _plain(args) or not _plain(kwargs):
            return
        self.inputs[id(module)] = (module, fresh(args), fresh(kwargs))

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is not self.model:
            return
        self._unhook()
        self.model = None
        if failed:
            self.inputs = {}
        else:
            self.pending = info

    def after_checked_step(self, oi: Any) -> None:
        """The probes run after the step, once the other checks' views of the step's calls are closed."""
        info, self.pending = self.pending, None
        inputs, self.inputs = self.inputs, {}
        if info is None:
            return
        for module, args, kwargs in inputs.values():
            found = self._probe(module, args, kwargs, info)
            if found is not None:
                self._report(info, module, *found)

    def _probe(self, module: nn.Module, args: tuple, kwargs: dict, info: ModelInfo) \
            -> tuple[float, int, float | None] | None:
        contents = _Contents(module)
        flags = [(m, m.training) for m in module.modules()]
        try:
            with rerun(module, info.param_device), torch.no_grad():
                for m, _ in flags:
                    m.training = False
                module.training = True
                first = _first_float(module.forward(*fresh(args), **fresh(kwargs)))
                second = _first_float(module.forward(*fresh(args), **fresh(kwargs)))
                if first is None or second is None or first.shape != second.shape or torch.equal(first, second):
                    return None  # not random in training mode: nothing to average
                draws = [first.float(), second.float()]
                for _ in range(DRAWS - 2):
                    out = _first_float(module.forward(*fresh(args), **fresh(kwargs)))
                    if out is None or out.shape != first.shape:
                        return None
                    draws.append(out.float())
                module.training = False
                ev = _first_float(module.forward(*fresh(args), **fresh(kwargs)))
                ev2 = _first_float(module.forward(*fresh(args), **fresh(kwargs)))
        except Exception:  # noqa: BLE001  a module that cannot be run on its own again: nothing to judge
            return None
        finally:
            for m, flag in flags:
                m.training = flag
            contents.restore()
        if ev is None or ev2 is None or ev.shape != first.shape or not torch.equal(ev, ev2):
            return None  # random in eval mode too (Monte Carlo sampling on purpose): not judged
        stack = torch.stack(draws)
        if not torch.isfinite(stack).all() or not torch.isfinite(ev).all():
            return None
        mean, spread = stack.mean(0), stack.std(0)
        scale = float(stack.abs().amax())
        varies = spread > 1e-5 * max(scale, 1e-12)
        n = int(varies.sum())
        if n < MIN_RANDOM:
            return None
        ev = ev.float()
        tol = 1e-4 * scale
        if _rearranged(stack, ev, tol):
            return None  # the draws move values across positions (a random flip or permutation): augmentation
        inside = ((ev >= stack.amin(0) - tol) & (ev <= stack.amax(0) + tol))[varies]
        ratio = None
        if float(inside.float().mean()) < INSIDE:
            ratio = _scaled(ev[varies], mean[varies], spread[varies])
            if ratio is None:
                return None  # the eval output is not one training mode produces (another output by design): not judged
        t = ((ev - mean)[varies] / spread[varies]).abs()
        med = float(t.median())
        return (med, n, ratio) if med > LIMIT else None

    def _report(self, info: ModelInfo, module: nn.Module, med: float, n: int, ratio: float | None) -> None:
        cls = type(module).__name__
        code = _forward_code(module)
        line = short_location(code.co_filename, code.co_firstlineno) if code is not None else ""
        try:
            path = inspect.getsourcefile(type(module))
            src, start = inspect.getsourcelines(type(module).forward)
            for i, text in enumerate(src):
                if "training" in text and path:
                    line = short_location(path, start + i)
                    break
        except (OSError, TypeError):
            pass
        name = info.sub_names.get(id(module), info.name)
        where = f"{cls}.forward at {line}" if line else f"{cls}.forward"
        scaled = "" if ratio is None else (
            f"; its eval-mode output is {ratio:.2f} times their average on every element, outside the range its "
            "training-mode draws take: the kept values are scaled by another factor than 1/keep_prob")
        self.s.report(
            "eval-not-train-expectation",
            f"{name} ({cls}, forward at {line or 'its class'}) draws random numbers in training mode, and its "
            f"eval-mode output is not their expectation: on one training batch, averaged over {DRAWS} training-mode "
            f"passes (its submodules in eval mode), its output sits a median {med:.2f} training-mode spreads away from "
            f"its eval-mode output over the {n} elements that vary (a correct random regulariser: about "
            f"{0.8 / DRAWS ** 0.5:.2f}, the sampling error){scaled}. Every layer after it sees activations of another scale in "
            "evaluation than it was trained on, on average, so the evaluated network is not the trained one (a keep "
            "probability never applied in evaluation, a dropout without 1/(1-p), a dropout scaled twice).",
            fix="make the eval-mode output the training output's expectation: scale kept values by 1/keep_prob in "
                "training and do nothing in eval (inverted dropout), or multiply by keep_prob in eval and check that "
                "the eval branch runs (a condition such as `if self.training and self.drop_rate:` makes it dead code)",
            where=where, key=f"{info.name}:{cls}")

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def remove_hooks(self) -> None:
        self._unhook()
        self.inputs.clear()
