"""Guard on hand-written optimizers whose update is not the one their name and hyperparameters define (slug
``optimizer-off-definition``; issue 33).

Two premises, each proven by running the user's own ``step()`` on copies (float64 clones of the parameters, their
gradients and the optimizer's state), once per optimizer, on its first checked step whose gradients are final
(a step given a closure is not probed).  Nothing of the real optimizer moves: its parameters, gradients and state
are never handed to the probe, the random generators are put back, and the comparison is read with the next
checked step (no synchronisation).

- **named after an algorithm torch ships.**  A subclass of ``torch.optim.Optimizer`` whose ``step`` is the user's
  and whose class is named ``Adam``, ``AdamW``, ``RAdam``, ``NAdam``, ``SGD``, ``RMSprop``, ``Adagrad``, ``Adamax``
  or ``Adadelta`` (case aside; a ``My``/``Custom``/``Simple`` prefix or an ``Optimizer`` suffix allowed) is run
  from a fresh state for :data:`STEPS` steps on the step's gradients, beside torch's class built with the same
  hyperparameters (every key of the user's groups must be a hyperparameter torch's class takes: a group with keys
  of its own is a variant, not judged).  The displacements must agree to :data:`TOLERANCE` (relative norm); weight
  decay is accepted coupled or decoupled, eps inside or outside the root changes nothing at this tolerance.
- **decoupled weight decay.**  For an optimizer whose decay is declared decoupled (``AdamW``, ``Lion``, ``SGDW``,
  ``...W``; a group key ``decoupled_weight_decay`` set), the user's step is run twice from the real state: with
  the group's weight decay and with 0.  A decoupled decay changes the result by a multiple of the weight (before
  or after the rest of the update: ``-c * p`` or ``-c * p_without_decay``); folding it into the gradient changes
  what the moments and the sign see instead.  Reported when neither fits to :data:`DECAY_FIT`.
- **a trust-ratio optimizer adds its decay to the step it scales.**  For a LAMB (named so, or an Adam-family
  optimizer whose ``step`` computes a trust ratio) with a decay, the user's step is run once from a fresh state
  with the decay and with 0: each tensor's update with the decay must be a combination of its update without it
  and its weight (:mod:`overt.guards.trustdecay`); a decay added to the gradient leaves that plane.
- **eps is the denominator's floor** (any name).  An optimizer whose groups carry a positive ``eps`` uses it as a
  numerical floor: the update may depart from the scale-free rule only where the gradients are near ``eps``.  The
  user's step is run from a fresh state for :data:`STEPS` steps on the step's gradients (weight decay set to 0),
  once with the groups' ``eps`` and once with ``eps`` shrunk by :data:`EPS_SHRINK`.  A floor at ``eps`` under the
  magnitudes of these gradients (each element's ``|g| / (|g| + eps)``, the update of Adam's rule from a fresh
  state on a constant gradient) keeps at least :data:`FLOOR_EXPECTED` of the update; reported when the user's
  update keeps :data:`FLOOR_GAP` times less than that (``sqrt(v + eps) + eps`` floors the root at ``sqrt(eps)``).
  An update that grows with ``eps`` (Adadelta's numerator) or a large ``eps`` chosen on purpose (its floor
  dominates by its own measure) is silent.
"""

from __future__ import annotations

import copy
import inspect
import math
import re
from collections import OrderedDict, defaultdict
from typing import TYPE_CHECKING, Any

import torch

from overt.guards import aside, patches, putback, trustdecay
from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import OptInfo

STEPS = 3  # probe steps from a fresh state (RAdam's and Adam's corrections differ from the second step on)
TOLERANCE = 0.25  # relative norm of the displacement's difference from torch's
DECAY_FIT = 0.3  # residual of the best fit of the decay's effect to a multiple of the weight
MAX_NUMEL = 200_000  # elements probed per optimizer
MAX_PARAMS = 8
EPS_SHRINK = 1e-6  # the reference eps of the floor premise, as a fraction of the configured one
FLOOR_EXPECTED = 0.1  # a floor at eps keeps at least this fraction of the update on the probed gradients
FLOOR_GAP = 30.0  # the user's update keeps this many times less than a floor at eps would: a higher floor

TORCH_NAMES = {"adam": "Adam", "adamw": "AdamW", "radam": "RAdam", "nadam": "NAdam", "sgd": "SGD",
               "rmsprop": "RMSprop", "adagrad": "Adagrad", "adamax": "Adamax", "adadelta": "Adadelta"}
DECOUPLED = {"adamw", "lion", "sgdw", "nadamw", "radamw", "adamaxw", "lionw"}
_PREFIX = re.compile(r"^(my|custom|simple|manual|naive|handwritten|plain|vanilla)")
_SUFFIX = re.compile(r"(optimizer|optim|opt)$")
_IGNORED_KEYS = {"params", "initial_lr", "name", "param_names", "foreach", "capturable", "differentiable",
                 "fused", "maximize"}
_DECAY_KEYS = ("weight_decay", "wd")

#: set in the ``__dict__`` of a probe's copy of an optimizer: the session's global optimizer hooks skip it
PROBE_MARK = "_overt_optdef_probe"


def algorithm(cls: type) -> str:
    """The class's name reduced to an algorithm's ("MyAdamW" -> "adamw")."""
    name = re.sub(r"[^a-z]", "", cls.__name__.lower())
    name = _PREFIX.sub("", name)
    return _SUFFIX.sub("", name) if _SUFFIX.sub("", name) else name


def _raw_step(cls: type) -> Any:
    """The class's own ``step``, under torch's hook wrapper (so that the probe calls no step hook)."""
    step = cls.step
    if getattr(step, "hooked", False) and hasattr(step, "__wrapped__"):
        step = step.__wrapped__
    return step


def _user_step(opt: torch.optim.Optimizer) -> Any | None:
    step = _raw_step(type(opt))
    fn = inspect.unwrap(step)
    code = getattr(fn, "__code__", None)
    return step if code is not None and is_user_file(code.co_filename) else None


def _f64(t: torch.Tensor) -> torch.Tensor:
    return t.detach().to(torch.float64).clone() if t.is_floating_point() else t.detach().clone()


def _copy_value(v: Any) -> Any:
    if isinstance(v, torch.Tensor):
        return _f64(v)
    try:
        return copy.deepcopy(v)
    except Exception:
        return v


class _Probe:
    """Float64 copies of (some of) an optimizer's parameters with their gradients, by group."""

    def __init__(self, opt: torch.optim.Optimizer):
        self.groups: list[tuple[dict, list[tuple[torch.Tensor, torch.Tensor]]]] = []
        left, count = MAX_NUMEL, 0
        for g in opt.param_groups:
            chosen = []
            for p in g["params"]:
                if (count >= MAX_PARAMS or p.grad is None or not p.is_floating_point() or p.grad.is_sparse
                        or p.numel() > left or p.numel() == 0):
                    continue
                chosen.append((p, p.grad))
                left -= p.numel()
                count += 1
            if chosen:
                self.groups.append(({k: v for k, v in g.items() if k != "params"}, chosen))

    def params(self) -> list[torch.Tensor]:
        return [p for _, ps in self.groups for p, _ in ps]

    def run_user(self, opt: torch.optim.Optimizer, steps: int, state: bool, hyper: dict | None = None
                 ) -> list[torch.Tensor] | None:
        """The user's step run ``steps`` times on copies (from the real state when ``state``, else from an empty
        one); the copies' values after the last one, or None when the step failed."""
        probe = object.__new__(type(opt))  # (copy.copy keeps only what Optimizer.__getstate__ returns)
        probe.__dict__.update(opt.__dict__)
        for name, value in opt.__dict__.items():  # none of the user's or the guards' hooks on the copy
            if name.startswith("_optimizer_") and name.endswith("_hooks") and isinstance(value, dict):
                probe.__dict__[name] = OrderedDict()
        probe.__dict__[PROBE_MARK] = True  # the guards' global optimizer hooks leave it alone (a step of the
        # user's class that calls its parent's step() goes through torch's hook wrapper again)
        groups, new_state = [], defaultdict(dict)
        copies = []
        for hyper_g, ps in self.groups:
            plist = []
            for p, g in ps:
                q = torch.nn.Parameter(_f64(p), requires_grad=p.requires_grad)
                q.grad = _f64(g)
                plist.append(q)
                if state and p in opt.state:
                    new_state[q] = {k: _copy_value(v) for k, v in opt.state[p].items()}
            groups.append({**{k: _copy_value(v) for k, v in hyper_g.items()}, **(hyper or {}), "params": plist})
            copies.extend(plist)
        probe.__dict__["param_groups"] = groups
        probe.__dict__["state"] = new_state
        step = _user_step(opt)
        if step is None:
            return None
        for _ in range(steps):
            with torch.no_grad(), aside.user_code():
                step(probe)
        return [q.detach() for q in copies]

    def run_torch(self, cls: type, hyper_by_group: list[dict], steps: int) -> list[torch.Tensor]:
        copies, groups = [], []
        for (_, ps), hyper in zip(self.groups, hyper_by_group):
            plist = []
            for p, g in ps:
                q = torch.nn.Parameter(_f64(p))
                q.grad = _f64(g)
                plist.append(q)
            groups.append({**hyper, "params": plist})
            copies.extend(plist)
        saved = list(patches.ACTIVE)  # torch's class is no optimizer of the program's: no session hears of it
        patches.ACTIVE.clear()
        try:
            ref = cls(groups)
        finally:
            patches.ACTIVE[:] = saved
        step = _raw_step(cls)
        for _ in range(steps):
            step(ref)
        return [q.detach() for q in copies]


def _torch_hyper(group: dict, cls: type) -> dict | None:
    """The group's hyperparameters under the names torch's ``cls`` takes, or None when a key is not one of them."""
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self", "params"}
    out: dict = {}
    b1 = group.get("beta1")
    for k, v in group.items():
        if k in _IGNORED_KEYS or k.startswith("_"):
            continue
        if k == "wd":
            k = "weight_decay"
        if k in ("beta1", "beta2") and "betas" in accepted:
            continue
        if k not in accepted:
            return None
        if isinstance(v, torch.Tensor):
            v = float(v)
        out[k] = v
    if b1 is not None and "beta2" in group and "betas" in accepted:
        out["betas"] = (float(b1), float(group["beta2"]))
    return out


def _decay_key(group: dict) -> str | None:
    for k in _DECAY_KEYS:
        v = group.get(k)
        if type(v) in (int, float) and v > 0:
            return k
    return None


def _step_source(step: Any) -> tuple[list[str], int, str] | None:
    """The source lines of an optimizer's ``step``, its first line number and its file, or None (no source)."""
    try:
        fn = inspect.unwrap(step)
        lines, first = inspect.getsourcelines(fn)
        return lines, first, fn.__code__.co_filename
    except (OSError, TypeError, AttributeError):
        return None


def _decay_line(step: Any, key: str) -> str | None:
    """The line of ``step`` that applies the decay: the first that uses the decay's name outside its read."""
    source = _step_source(step)
    if source is None:
        return None
    lines, first, filename = source
    names = {key}
    for line in lines:
        m = re.match(r"\s*([\w\s,]+?)\s*=\s*(.+)$", line)
        if m and key in m.group(2) and "group" in m.group(2):
            targets = [t.strip() for t in m.group(1).split(",")]
            values = [v.strip() for v in m.group(2).split(",")]
            for t, v in zip(targets, values):
                if key in v:
                    names.add(t)
    for i, line in enumerate(lines):
        if "group[" in line or "group.get" in line or line.lstrip().startswith(("def ", "#", "@")):
            continue
        if any(re.search(rf"\b{re.escape(n)}\b", line) for n in names):
            return short_location(filename, first + i)
    return short_location(filename, first)


def _step_line(step: Any) -> str:
    """``file:line`` of the ``def`` of ``step`` (below its decorators)."""
    try:
        fn = inspect.unwrap(step)
        lines, first = inspect.getsourcelines(fn)
        at = next((i for i, line in enumerate(lines) if line.lstrip().startswith("def ")), 0)
        return short_location(fn.__code__.co_filename, first + at)
    except (OSError, TypeError, AttributeError):
        return "step()"


class OptimizerDefinitionChecks(Check):
    name = "optdef"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.done: set[int] = set()  # id(optimizer) probed (or not probe-able)

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        opt = oi.opt
        if id(opt) in self.done:
            return
        self.done.add(id(opt))
        if closure or type(opt).__module__.startswith("torch.") or _user_step(opt) is None:
            return
        probe = _Probe(opt)
        if not probe.groups:
            return
        random_state = putback.RandomState(p.device for p in probe.params())
        try:
            self._reference(opt, probe)
            self._decoupled(opt, probe)
            self._trust_decay(opt, probe)
            self._eps_floor(opt, probe)
        finally:
            random_state.restore()

    # -- premise 1: torch's algorithm of the same name ---------------------------------------------------------
    def _reference(self, opt: torch.optim.Optimizer, probe: _Probe) -> None:
        alg = algorithm(type(opt))
        torch_name = TORCH_NAMES.get(alg)
        if torch_name is None:
            return
        cls = getattr(torch.optim, torch_name)
        hypers = [_torch_hyper(h, cls) for h, _ in probe.groups]
        if any(h is None for h in hypers):
            return  # a hyperparameter torch's class does not take: a variant
        if alg == "nadam" and not all("momentum_decay" in h for h, _ in probe.groups):
            return  # torch's NAdam schedules its momentum; a NAdam without that schedule is another variant
        start = [_f64(p) for p in probe.params()]
        try:
            user = probe.run_user(opt, STEPS, state=False)
        except Exception:
            return
        if user is None:
            return
        refs = []
        variants = [hypers]
        if any(h.get("weight_decay", 0) for h in hypers):  # decay coupled or decoupled: either passes
            if torch_name in ("Adam", "AdamW"):
                variants.append(hypers)
            elif "decoupled_weight_decay" in inspect.signature(cls.__init__).parameters:
                variants.append([{**h, "decoupled_weight_decay": not h.get("decoupled_weight_decay", False)}
                                 for h in hypers])
        for i, hs in enumerate(variants):
            c = cls
            if i == 1 and torch_name in ("Adam", "AdamW"):
                c = torch.optim.AdamW if torch_name == "Adam" else torch.optim.Adam
            try:
                refs.append(probe.run_torch(c, hs, STEPS))
            except Exception:
                continue
        if not refs:
            return
        du = torch.cat([(u - s).flatten() for u, s in zip(user, start)])
        gaps = []
        for ref in refs:
            dr = torch.cat([(r - s).flatten() for r, s in zip(ref, start)])
            gaps.append(torch.stack(((du - dr).norm(), dr.norm(), du.norm())))
        vals = torch.stack(gaps).flatten().to(torch.float32)
        self.s.defer(vals, self._judge_reference(opt, torch_name))

    def _judge_reference(self, opt: torch.optim.Optimizer, torch_name: str):
        def callback(vals: list[float]) -> None:
            rel = []
            for i in range(0, len(vals), 3):
                gap, ref, mine = vals[i:i + 3]
                if not (math.isfinite(gap) and math.isfinite(ref) and ref > 0):
                    rel.append(float("inf") if math.isfinite(ref) and ref > 0 else 0.0)
                    continue
                rel.append(gap / ref)
            best = min(rel)
            if not best > TOLERANCE:
                return
            ratio = vals[2] / vals[1] if vals[1] > 0 else float("inf")
            name = type(opt).__name__
            msg = (f"the hand-written optimizer {name} does not compute {torch_name}: run from a fresh state on copies "
                   f"of this step's parameters and gradients for {STEPS} steps, its update differs from "
                   f"torch.optim.{torch_name}'s with the same hyperparameters ({self._hyper_text(opt)}) by "
                   f"{best:.0%} of torch's (its displacement is {ratio:.3g} times torch's; weight decay coupled or "
                   "decoupled both tried). Every update of the run follows the wrong rule: a bias correction written "
                   "into the stored moments, a moment updated with the wrong coefficient, a correction applied twice "
                   "make the steps too large or too small without any error.")
            fix = (f"compare {name}.step() with torch.optim.{torch_name} on the same parameters and gradients; keep "
                   "corrections out of the optimizer state (m_hat = exp_avg / (1 - beta1 ** t), not exp_avg.div_(...)), "
                   f"or use torch.optim.{torch_name} itself. A deliberate variant should not carry the name of the "
                   "algorithm it changes.")
            self.s.report("optimizer-off-definition", msg, where=_step_line(_raw_step(type(opt))), fix=fix,
                          key=f"{name}:reference")

        return callback

    @staticmethod
    def _hyper_text(opt: torch.optim.Optimizer) -> str:
        g = opt.param_groups[0]
        parts = [f"{k}={v!r}" for k, v in g.items() if k not in _IGNORED_KEYS and not isinstance(v, torch.Tensor)]
        return ", ".join(parts)[:160]

    # -- premise 2: a decoupled decay shrinks the weight ---------------------------------------------------------
    def _decoupled(self, opt: torch.optim.Optimizer, probe: _Probe) -> None:
        alg = algorithm(type(opt))
        groups = [h for h, _ in probe.groups]
        declared = alg in DECOUPLED or any(h.get("decoupled_weight_decay") is True for h in groups)
        keys = [_decay_key(h) for h in groups]
        if not declared or not any(keys):
            return
        start = [_f64(p) for p in probe.params()]
        try:
            with_decay = probe.run_user(opt, 1, state=True)
            saved = probe.groups
            probe.groups = [({**h, k: 0.0} if k else h, ps) for (h, ps), k in zip(probe.groups, keys)]
            try:
                without = probe.run_user(opt, 1, state=True)
            finally:
                probe.groups = saved
        except Exception:
            return
        if with_decay is None or without is None:
            return
        d = torch.cat([(a - b).flatten() for a, b in zip(with_decay, without)])
        rows = []
        for a, b, s in zip(with_decay, without, start):
            diff = (a - b).flatten()
            res = []
            for base in (s.flatten(), b.flatten()):
                nb = (base * base).sum()
                c = (diff * base).sum() / nb if nb > 0 else torch.zeros((), dtype=diff.dtype)
                res.append(((diff - c * base) ** 2).sum())
            rows.append(torch.stack(res))
        resid = torch.stack(rows).sum(0)
        vals = torch.cat((resid, (d * d).sum().reshape(1))).to(torch.float64)
        key = next(k for k in keys if k)
        self.s.defer(vals, self._judge_decay(opt, key, alg))

    def _judge_decay(self, opt: torch.optim.Optimizer, key: str, alg: str):
        def callback(vals: list[float]) -> None:
            r_before, r_after, total = vals
            if not (total > 0 and math.isfinite(total)):
                return  # the decay changed nothing, or the step failed: not this premise's to judge
            fit = math.sqrt(min(r_before, r_after) / total)
            if not fit > DECAY_FIT:
                return
            name = type(opt).__name__
            step = _raw_step(type(opt))
            wd = opt.param_groups[0].get(key)
            msg = (f"{name}'s weight decay ({key}={wd!r}) is not decoupled, though "
                   f"{'its algorithm' if alg in DECOUPLED else 'its group'} declares it so: run on copies of this "
                   f"step's parameters, gradients and state with the decay and with {key}=0, the two results differ "
                   f"by something that is not a multiple of the weight ({fit:.0%} of the difference is left over by "
                   "the best such multiple, before or after the rest of the update). The decay went into the "
                   "gradient or the moments, where the adaptive scaling or the sign rescales it: weights are not "
                   "shrunk in proportion to their size, and a large decay (Lion's, ten times AdamW's) takes over the "
                   "update's direction and marches the weights to zero.")
            fix = (f"apply the decay to the parameter itself, apart from the update: p.mul_(1 - lr * {key}) before "
                   f"the update (as torch.optim.AdamW does), and leave the gradient the moments and the sign see "
                   "unchanged.")
            self.s.report("optimizer-off-definition", msg, where=_decay_line(step, key) or _step_line(step), fix=fix,
                          key=f"{name}:decoupled")

        return callback

    # -- premise 2b: a trust-ratio optimizer (LAMB) adds its decay to the update it scales -------------------------
    def _trust_decay(self, opt: torch.optim.Optimizer, probe: _Probe) -> None:
        groups = [h for h, _ in probe.groups]
        keys = [_decay_key(h) for h in groups]
        step = _raw_step(type(opt))
        source = _step_source(step)
        alg = algorithm(type(opt))
        if not any(keys) or alg in DECOUPLED or not trustdecay.is_trust_ratio(alg, groups, source and source[0]):
            return
        start = [_f64(p) for p in probe.params()]
        saved = probe.groups
        try:
            with_decay = probe.run_user(opt, 1, state=False)
            probe.groups = [({**h, k: 0.0} if k else h, ps) for (h, ps), k in zip(saved, keys)]
            without = probe.run_user(opt, 1, state=False)
        except Exception:
            return
        finally:
            probe.groups = saved
        if with_decay is None or without is None:
            return
        vals = trustdecay.plane_residual(with_decay, without, start).to(torch.float64)
        self.s.defer(vals, self._judge_trust(opt, next(k for k in keys if k)))

    def _judge_trust(self, opt: torch.optim.Optimizer, key: str):
        def callback(vals: list[float]) -> None:
            resid, total = vals
            if not (total > 0 and math.isfinite(total) and math.isfinite(resid)):
                return
            fit = math.sqrt(resid / total)
            if not fit > trustdecay.TRUST_FIT:
                return
            name = type(opt).__name__
            step = _raw_step(type(opt))
            wd = opt.param_groups[0].get(key)
            msg = (f"{name} scales its update layer by layer with a trust ratio, as LAMB does, but its weight decay "
                   f"({key}={wd!r}) does not enter that update: run on copies of this step's parameters and gradients "
                   f"from a fresh state with the decay and with {key}=0, each tensor's update with the decay should be "
                   "its update without it plus a multiple of its weight (LAMB adds wd * w to the normalised step "
                   f"before the trust ratio), and {fit:.0%} of it is left over by the best such combination. The decay "
                   "went into the gradient the moments see, where the elementwise normalisation rescales it to the "
                   "gradient's size and the trust ratio never sees it: the layer-wise decay LAMB prescribes is not "
                   "applied, and a run that needs it overfits or stalls with no error.")
            fix = (f"leave the gradient alone and add the decay to the normalised step: update = exp_avg / "
                   f"(exp_avg_sq.sqrt() + eps); update.add_(p, alpha={key}); then compute the trust ratio from "
                   "||p|| / ||update|| and apply it to that update (as the LAMB paper's algorithm does).")
            self.s.report("optimizer-off-definition", msg, where=_trust_decay_line(step, key) or _step_line(step),
                          fix=fix, key=f"{name}:trust-decay")

        return callback

    # -- premise 3: eps is the denominator's floor ---------------------------------------------------------------
    def _eps_floor(self, opt: torch.optim.Optimizer, probe: _Probe) -> None:
        groups = [h for h, _ in probe.groups]
        eps = [h.get("eps") for h in groups]
        if not all(type(e) is float and 0 < e < 1 for e in eps):
            return  # no eps, a tuple (Adafactor's pair), a tensor: nothing to read as a floor
        zero = {k: 0.0 for h in groups for k in _DECAY_KEYS if type(h.get(k)) in (int, float) and h.get(k)}
        start = [_f64(p) for p in probe.params()]
        saved = probe.groups
        try:
            probe.groups = [({**h, **{k: v for k, v in zero.items() if k in h}}, ps) for h, ps in saved]
            configured = probe.run_user(opt, STEPS, state=False)
            probe.groups = [({**h, **{k: v for k, v in zero.items() if k in h}, "eps": h["eps"] * EPS_SHRINK}, ps)
                            for h, ps in saved]
            shrunk = probe.run_user(opt, STEPS, state=False)
        except Exception:
            return
        finally:
            probe.groups = saved
        if configured is None or shrunk is None:
            return
        dc = torch.cat([(u - s).flatten() for u, s in zip(configured, start)])
        ds = torch.cat([(u - s).flatten() for u, s in zip(shrunk, start)])
        floor, free, grads = [], [], []
        for (h, ps) in probe.groups:
            for _, g in ps:
                a = _f64(g).abs().flatten()
                floor.append(a / (a + h["eps"]))
                free.append(a / (a + h["eps"] * EPS_SHRINK))
                grads.append(a)
        g = torch.cat(grads)
        vals = torch.stack((dc.norm(), ds.norm(), torch.cat(floor).norm(), torch.cat(free).norm(),
                            g.norm() / math.sqrt(max(g.numel(), 1)))).to(torch.float64)
        self.s.defer(vals, self._judge_floor(opt, eps[0]))

    def _judge_floor(self, opt: torch.optim.Optimizer, eps: float):
        def callback(vals: list[float]) -> None:
            kept, free, floor, ref, rms = vals
            if not all(math.isfinite(v) for v in vals) or not (free > 0 and ref > 0):
                return
            observed, expected = kept / free, floor / ref
            if not (expected >= FLOOR_EXPECTED and observed * FLOOR_GAP < expected):
                return
            name = type(opt).__name__
            if self.s.reporter.has("optimizer-off-definition", f"{name}:reference"):
                return  # already named as another algorithm's wrong copy
            step = _raw_step(type(opt))
            msg = (f"{name}'s denominator has a floor far above its eps ({eps:g}): run on copies of this step's "
                   f"parameters and gradients (RMS {rms:.3g}) from a fresh state for {STEPS} steps, its update is "
                   f"{observed:.3g} of the update with eps shrunk {1 / EPS_SHRINK:.0e}-fold, where a floor at eps "
                   f"would keep {expected:.0%} of it. Something much larger than eps bounds the denominator (eps "
                   "added under the square root as well as after it floors the root at sqrt(eps)), so wherever the "
                   f"gradients are small, as this program's are, every step is about {expected / max(observed, 1e-300):.0f} "
                   "times smaller than the algorithm's and the model barely moves, with no error.")
            fix = ("add eps once, after the square root: denom = (exp_avg_sq / bias_correction2).sqrt().add_(eps) "
                   "(or use torch.optim.Adam); if a floor inside the root is meant, give it its own, much smaller "
                   "constant.")
            self.s.report("optimizer-off-definition", msg, where=_use_line(step, "eps") or _step_line(step), fix=fix,
                          key=f"{name}:eps")

        return callback


def _trust_decay_line(step: Any, key: str) -> str | None:
    """``file:line`` of the line of ``step`` that applies the decay (see :func:`trustdecay.decay_line_index`)."""
    source = _step_source(step)
    if source is None:
        return None
    lines, first, filename = source
    at = trustdecay.decay_line_index(lines, key)
    return None if at is None else short_location(filename, first + at)


def _use_line(step: Any, key: str) -> str | None:
    """``file:line`` of the first line of ``step`` that computes with the group's ``key`` (read inline, or through
    a name it was read into), not merely reading it."""
    source = _step_source(step)
    if source is None:
        return None
    lines, first, filename = source
    read = re.compile(rf"""group(\[\s*['"]{re.escape(key)}['"]\s*\]|\.get\(\s*['"]{re.escape(key)}['"][^)]*\))""")
    names: set[str] = set()
    uses = []
    for i, line in enumerate(lines):
        code = line.split("#", 1)[0]
        if not code.strip() or code.lstrip().startswith(("def ", "@")):
            continue
        m = re.match(r"\s*([\w\s,]+?)\s*=\s*([^=].*)$", code)
        if m:
            targets = [t.strip() for t in m.group(1).split(",")]
            values = [v.strip() for v in m.group(2).split(",")] if len(targets) > 1 else [m.group(2).strip()]
            reads = [t for t, v in zip(targets, values) if read.fullmatch(v)]
            if reads and len(targets) == len(values) and all(
                    read.fullmatch(v) or "group[" in v or "group.get" in v for v in values):
                names.update(reads)
                continue
        if read.search(code) or any(re.search(rf"\b{re.escape(n)}\b", code) for n in names):
            uses.append(i)
    return short_location(filename, first + uses[0]) if uses else None


__all__ = ["OptimizerDefinitionChecks", "algorithm"]
