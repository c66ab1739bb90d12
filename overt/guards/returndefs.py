"""Returns, advantages and value targets recomputed by their recursion (slug ``targets-off-recursion``; issue 33,
session 49).

A function named after a return, an advantage or a value target (``gae``, ``compute_gae``, ``compute_returns``,
``compute_value_targets``, ``discount_rewards``, ``reward_to_go`` ...) whose parameters say which argument holds
the rewards, which the values, which the episode-end flags and which number is the discount gives values that one
recursion fixes:

    delta_t = r_t + gamma * c_t * V_{t+1} - V_t
    A_t     = delta_t + gamma * lambda * c_t * A_{t+1},   A_T = 0
    G_t     = A_t + V_t                                   (returns; with no values: G_t = r_t + gamma c_t G_{t+1})

where ``c_t`` is 1 while the episode goes on after step ``t`` and 0 where it ended, and ``V_T`` is the bootstrap
(the values' extra last entry, a ``next_value``/``bootstrap`` argument, or 0 when neither is given).  Accepted
conventions: the flags read as "step t ended the episode" (``c_t = 1 - done_t``) or as "observation t starts a new
one" (``c_t = 1 - done_{t+1}``, the last from a ``next_done`` argument), masks (1 = goes on) or dones, time on the
first or on the other axis where the shapes allow both, the advantages, the returns, or either standardised (any
positive affine map of them over the whole call), a tuple holding one of them; with values but no lambda, the TD(0)
target and the bootstrapped Monte Carlo return.  A discount and a lambda are read from the call, or from a global
the function's code names (``GAMMA``, ``LAM``); a return function with neither, whose code can hold no other
discount (:mod:`overt.guards.undiscounted`), is read as undiscounted (gamma = 1; session 56, w324).

Silent when the call does not have this form: no reward or discount identified, arguments that are neither of
the roles nor flags (a truncation array, a clip value, weights), flags that are not 0/1, shapes that do not line
up, fewer than 2 steps or more than 1,000,000 rewards, no output with one number per reward.
"""

from __future__ import annotations

import types
from typing import Any, Callable

import numpy as np
import torch

from overt.guards.undiscounted import no_discount_possible

MAX_NUMEL = 1_000_000
#: name words of a function that computes returns, advantages or value targets
_CLAIMS = frozenset({"gae", "advantage", "advantages", "returns", "return", "discounted", "lambda"})
#: name words that make a function something else (a loss over the targets, a plot, a normaliser, a buffer method)
_NOT = frozenset({"loss", "plot", "print", "log", "show", "save", "load", "normalize", "normalise", "norm", "clip",
                  "sample", "add", "store", "push", "reset", "update", "train", "step", "policy", "act", "mean",
                  "std", "metric", "mc", "episode", "episodes", "eval", "evaluate", "test", "rollout", "collect"})
_GAMMA = frozenset({"gamma", "discount", "discount_factor", "gam", "gamma_", "disc", "discount_rate"})
_LAMBDA = frozenset({"lambda", "lam", "lmbda", "lambda_", "lambd", "lamda", "lmbd", "gae_lambda", "gae_lam",
                     "lambda_gae", "gae_lmbda", "td_lambda", "lam_", "gae_param"})  # "lambda": a module global only
_REWARD = ("rew",)
_MASK_WORDS = ("mask", "not_done", "notdone", "nonterminal", "non_terminal", "not_terminal", "continue", "alive",
               "nondone", "non_done", "undone")
_DONE_WORDS = ("done", "terminal", "terminat", "is_end", "episode_end", "ends", "eos")
_NEXT = ("next", "last", "final", "bootstrap", "boot", "tail")
_VALUE_NAMES = frozenset({"v", "vs", "v_pred", "vpred", "vpreds", "v_preds", "baseline", "baselines", "v_s"})


def definition_of(words: frozenset[str] | set[str]) -> str | None:
    """"returns" when a function named with ``words`` claims to compute returns, advantages or value targets."""
    if words & _NOT:
        return None
    if words & _CLAIMS or ({"target", "targets"} & words and {"value", "values", "td", "q"} & words) \
            or ("discount" in words and {"reward", "rewards"} & words) or {"to", "go"} <= words \
            or {"rtg", "rtgs"} & words:
        return "returns"
    return None


def _array(x: Any) -> torch.Tensor | None:
    try:
        if isinstance(x, torch.Tensor):
            if x.is_complex():
                return None
            out = x.detach().to("cpu", torch.float64)
        elif isinstance(x, np.ndarray) and x.dtype.kind in "biuf":
            out = torch.as_tensor(x.astype(np.float64))
        elif isinstance(x, (list, tuple)) and x and all(isinstance(v, (int, float, bool, np.number)) for v in x):
            out = torch.tensor([float(v) for v in x], dtype=torch.float64)
        elif isinstance(x, (list, tuple)) and x and all(isinstance(v, torch.Tensor) and v.numel() == 1 for v in x):
            out = torch.tensor([float(v) for v in x], dtype=torch.float64)
        else:
            return None
    except (TypeError, ValueError, RuntimeError):
        return None
    if out.numel() > MAX_NUMEL or not bool(torch.isfinite(out).all()):
        return None
    return out.reshape([d for d in out.shape if d != 1])  # dimensions of size 1 carry no axis


def _scalar(x: Any) -> float | None:
    if isinstance(x, bool):
        return None
    if isinstance(x, (int, float, np.floating)):
        return float(x)
    if isinstance(x, torch.Tensor) and x.numel() == 1 and x.is_floating_point():
        return float(x)
    return None


def _names(code: types.CodeType) -> set[str]:
    out = set(code.co_names)
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            out |= _names(c)
    return out


def _global(fn: Callable, names: frozenset[str]) -> tuple[str, float] | None:
    """(name, value) of the one module global of ``names`` that ``fn``'s code reads, else None."""
    code = getattr(fn, "__code__", None)
    if code is None:
        return None
    found = {n: _scalar(fn.__globals__.get(n)) for n in _names(code) if n.lower() in names and n in fn.__globals__}
    found = {n: v for n, v in found.items() if v is not None}
    return next(iter(found.items())) if len(found) == 1 else None


class _Roles:
    __slots__ = ("rewards", "values", "next_values", "boot", "flags", "next_flags", "polarity", "gamma", "lam",
                 "names", "flags_seen", "counts")

    def __init__(self):
        self.rewards = self.values = self.next_values = self.boot = self.flags = self.next_flags = None
        self.polarity = "done"
        self.gamma = self.lam = None
        self.names: dict[str, str] = {}
        self.flags_seen = False  # a boolean switch among the arguments (use_gae, normalize)
        self.counts: list[int] = []  # integer arguments (a rollout length, a number of environments)


def roles(fn: Callable, words: frozenset[str], bound: dict[str, Any]) -> _Roles | None:
    """Which argument plays which part, from the parameters' names; None when any argument is left unexplained
    or a needed one is missing."""
    out = _Roles()
    for param, value in bound.items():
        low = param.lower()
        if low in ("self", "cls"):
            continue
        if low in _GAMMA:
            out.gamma, out.names["gamma"] = _scalar(value), param
            if out.gamma is None:
                return None
            continue
        if low in _LAMBDA or (low == "tau" and "gae" in words):
            out.lam, out.names["lambda"] = _scalar(value), param
            if out.lam is None:
                return None
            continue
        if "truncat" in low or "timeout" in low or "time_limit" in low:
            return None  # a truncation convention this definition does not model
        nexty = any(w in low for w in _NEXT)
        masky = any(w in low for w in _MASK_WORDS)
        doney = not masky and any(w in low for w in _DONE_WORDS)
        if masky or doney:
            if out.flags is None and not nexty or (nexty and out.next_flags is None):
                array = _array(value)
                if array is None or not bool(((array == 0) | (array == 1)).all()):
                    return None
                polarity = "mask" if masky else "done"
                if nexty:
                    out.next_flags = array
                else:
                    out.flags = array
                if out.names.get("flags-polarity") not in (None, polarity):
                    return None
                out.names["flags-polarity"] = polarity
                out.polarity = polarity
                out.names["next_flags" if nexty else "flags"] = param
                continue
            return None
        if any(w in low for w in _REWARD):
            if out.rewards is not None:
                return None
            out.rewards = _array(value)
            out.names["rewards"] = param
            if out.rewards is None:
                return None
            continue
        valuey = ("val" in low and "valid" not in low and "interval" not in low) or low in _VALUE_NAMES \
            or low.startswith("v_")
        if nexty and (valuey or low in ("bootstrap", "boot", "bootstrap_v", "last_v", "next_v")):
            array = _array(value) if not isinstance(value, (int, float)) or isinstance(value, bool) \
                else torch.tensor(float(value), dtype=torch.float64)
            if array is None:
                return None
            if out.boot is None and out.next_values is None:
                out.next_values = array  # a per-step array or one bootstrap, told apart by its shape later
                out.names["next"] = param
                continue
            return None
        if valuey:
            if out.values is not None:
                return None
            out.values = _array(value)
            out.names["values"] = param
            if out.values is None:
                return None
            continue
        if isinstance(value, bool) or value is None or isinstance(value, (torch.device, torch.dtype)) \
                or (isinstance(value, str) and low == "device"):
            out.flags_seen = out.flags_seen or isinstance(value, bool)
            continue
        if isinstance(value, int):
            out.counts.append(value)  # a length is accepted once it is seen to be one of the rewards' sizes
            continue
        return None  # an argument of unknown role: another computation than this definition's
    if out.rewards is None or out.rewards.ndim not in (1, 2):
        return None
    sizes = set(out.rewards.shape) | {out.rewards.numel()}
    if any(n not in sizes for n in out.counts):
        return None  # an integer that is no size of the rewards (an n of n-step returns, a horizon): not this recursion
    if out.gamma is None:
        found = _global(fn, _GAMMA)
        if found is not None:
            out.names["gamma"], out.gamma = f"global {found[0]}", found[1]
    if out.gamma is None and out.values is None and out.lam is None and no_discount_possible(fn):
        out.names["gamma"], out.gamma = "none in its code: undiscounted", 1.0
    if out.lam is None and out.values is not None:
        found = _global(fn, _LAMBDA)
        if found is not None:
            out.names["lambda"], out.lam = f"global {found[0]}", found[1]
    if out.gamma is None or not 0.0 < out.gamma <= 1.0 or (out.lam is not None and not 0.0 <= out.lam <= 1.0):
        return None
    if out.lam is None and out.values is not None and "gae" in words:
        return None  # GAE with a lambda we cannot read
    return out


def _recursion(r: torch.Tensor, v: torch.Tensor | None, v_next: torch.Tensor | None, c: torch.Tensor, gamma: float,
               lam: float, seed: torch.Tensor | None = None, carry_c: torch.Tensor | None = None) \
        -> dict[str, torch.Tensor]:
    """Time on axis 0.  With values: advantages and returns by GAE; without: discounted returns.  ``v_next``:
    V_{t+1} for every step (the bootstrap in the last row); ``seed``: the carry's starting value (0 in the
    definition); ``carry_c``: another factor on the carry than on the bootstrap (``c`` in the definition: only
    used to name a known slip)."""
    steps = r.shape[0]
    carry = torch.zeros_like(r[0]) if seed is None else seed.clone()
    out = torch.zeros_like(r)
    cc = c if carry_c is None else carry_c
    if v is None:
        for t in reversed(range(steps)):
            carry = r[t] + gamma * cc[t] * carry
            out[t] = carry
        return {"returns": out}
    for t in reversed(range(steps)):
        delta = r[t] + gamma * c[t] * v_next[t] - v[t]
        carry = delta + gamma * lam * cc[t] * carry
        out[t] = carry
    return {"advantages": out, "returns": out + v}


def _standard(x: torch.Tensor) -> torch.Tensor | None:
    sd = x.std()
    return None if not bool(sd > 1e-9) else (x - x.mean()) / sd


def _close(o: torch.Tensor, x: torch.Tensor, keep: torch.Tensor | None = None) -> bool:
    if keep is not None:
        if int(keep.sum()) < 2:
            return True  # nothing left to compare: no premise
        o, x = o[keep].reshape(-1, 1), x[keep].reshape(-1, 1)
    scale = float(x.abs().max()) if x.numel() else 0.0
    if bool(((o - x).abs() <= 1e-3 * max(scale, 1e-3) + 1e-5).all()):
        return True
    so, sx = _standard(o), _standard(x)
    if so is not None and sx is not None and bool(((so - sx).abs() <= 2e-3).all()):
        return True
    if o.shape[1] > 1 and o.shape[0] > 1:  # standardised per column (per environment or episode)
        so = (o - o.mean(0)) / o.std(0).clamp_min(1e-9)
        sx = (x - x.mean(0)) / x.std(0).clamp_min(1e-9)
        return bool(((so - sx).abs() <= 2e-3).all())
    return False


class _Layout:
    """One reading of the call's arrays with time on axis 0: rewards (T, N), values, V_{t+1}, flags."""

    def __init__(self, label: str, r, v, v_next, flags, next_flags, form: str, axis: int, shape):
        self.label, self.r, self.v, self.v_next, self.flags, self.next_flags = label, r, v, v_next, flags, next_flags
        self.form, self.axis, self.shape = form, axis, shape


def _tn(x: torch.Tensor, axis: int) -> torch.Tensor:
    x = x.movedim(axis, 0) if x.ndim > 1 else x
    return x.reshape(x.shape[0], -1)


def layouts(ro: _Roles) -> list[_Layout]:
    r = ro.rewards
    out = []
    axes = range(r.ndim)
    for axis in axes:
        steps = r.shape[axis]
        if steps < 2:
            continue
        rest = tuple(d for i, d in enumerate(r.shape) if i != axis)
        v = v_next = None
        form = "returns"
        flags = next_flags = None
        if ro.values is not None:
            vs = ro.values
            longer = list(r.shape)
            longer[axis] += 1
            if tuple(vs.shape) == tuple(longer):
                if ro.next_values is not None:
                    continue
                full = _tn(vs, axis)
                v, v_next, form = full[:-1], full[1:], "values with the bootstrap as their last step"
            elif vs.shape == r.shape:
                v = _tn(vs, axis)
                nv = ro.next_values
                if nv is None:
                    v_next = torch.cat([v[1:], torch.zeros_like(v[:1])])
                    form = "values without a bootstrap (0 after the last step)"
                elif nv.shape == r.shape:
                    v_next, form = _tn(nv, axis), "next-state values per step"
                elif tuple(nv.shape) == rest:
                    v_next = torch.cat([v[1:], nv.reshape(1, -1)])
                    form = "values and a bootstrap value"
                else:
                    continue
            else:
                continue
        elif ro.next_values is not None:
            if tuple(ro.next_values.shape) != rest:
                continue
            form = "rewards and a bootstrap value"
            v_next = ro.next_values.reshape(1, -1)  # only its shape is read: the returns' starting carry
        if ro.flags is not None:
            longer = list(r.shape)
            longer[axis] += 1
            if ro.flags.shape == r.shape:
                flags = _tn(ro.flags, axis)
            elif tuple(ro.flags.shape) == tuple(longer):
                flags = _tn(ro.flags, axis)
            else:
                continue
        if ro.next_flags is not None:
            if tuple(ro.next_flags.shape) != rest:
                continue
            next_flags = ro.next_flags.reshape(1, -1)
        out.append(_Layout(f"time on axis {axis}", _tn(r, axis), v, v_next, flags, next_flags, form, axis,
                           tuple(r.shape)))
    return out


def _mask(x: torch.Tensor, polarity: str) -> torch.Tensor:
    return x if polarity == "mask" else 1 - x


def conventions(lay: _Layout, polarity: str) -> dict[str, torch.Tensor]:
    """Continuation factors c_t (T, N) under each accepted reading of the flags."""
    steps = lay.r.shape[0]
    if lay.flags is None:
        # Pong's convention (a game ends at every non-zero reward) for rewards alone
        out = {"no flags": torch.ones_like(lay.r)}
        if lay.v is None:
            out["a game boundary at every non-zero reward"] = (lay.r == 0).to(lay.r.dtype)
        return out
    m = _mask(lay.flags, polarity)
    out = {}
    if m.shape[0] == steps:
        out["flags of step t (c_t = 1 - done_t)"] = m
        last = _mask(lay.next_flags, polarity) if lay.next_flags is not None else torch.ones_like(m[:1])
        out["flags of observation t + 1 (c_t = 1 - done_{t+1})"] = torch.cat([m[1:], last])
    else:  # one flag per observation, the bootstrap's included
        out["flags of step t (c_t = 1 - done_t)"] = m[:-1]
        out["flags of observation t + 1 (c_t = 1 - done_{t+1})"] = m[1:]
    if polarity == "mask":  # a mask may mark padding (the tokens of a response), not episode ends
        out[PADDING] = torch.ones_like(lay.r)
    return out


PADDING = "masks read as padding (c_t = 1, compared where the mask is 1)"


def _outputs(result: Any) -> list[torch.Tensor]:
    items = list(result) if isinstance(result, (tuple, list)) and result and \
        all(isinstance(v, (torch.Tensor, np.ndarray, list)) for v in result) else [result]
    out = []
    for item in items:
        arr = _array(item)
        if arr is not None:
            out.append(arr)
    return out


def _as_layout(o: torch.Tensor, lay: _Layout) -> torch.Tensor | None:
    if o.numel() != lay.r.numel():
        return None
    return _tn(o.reshape(lay.shape), lay.axis)


def check(fn: Callable, name: str, bound: dict[str, Any], result: Any, words: frozenset[str]) \
        -> tuple[str, str, str] | None:
    """("agree" | "differ", message, fix) on a call of ``fn``; None when the premise does not hold."""
    ro = roles(fn, words, bound)
    if ro is None:
        return None
    outputs = _outputs(result)
    if not outputs:
        return None
    lams = [ro.lam] if ro.lam is not None else [0.0, 1.0]
    if ro.flags_seen:
        lams = sorted(set(lams) | {0.0, 1.0})  # a switch may turn GAE into TD(0) or Monte Carlo returns
    best = None  # (gap, layout, convention, lambda, references, key, output) nearest to the call's output
    per_layout: dict[str, tuple] = {}  # the same, per layout of the call's arrays
    for lay in layouts(ro):
        shaped = [s for s in (_as_layout(o, lay) for o in outputs) if s is not None]
        if not shaped:
            continue
        for label, c in conventions(lay, ro.polarity).items():
            keep = None
            if label == PADDING:
                keep = (lay.flags[:lay.r.shape[0]] != 0)
            for lam in lams:
                refs = _references(lay, c, ro, lam)
                if any(_close(o, x, keep) for o in shaped for x in refs.values()):
                    return "agree", "", ""
                for key, x in refs.items():
                    for o in shaped:
                        gap = float((o - x).abs().max())
                        if best is None or gap < best[0]:
                            best = (gap, lay, label, lam, refs, key, o, shaped)
                        if lay.label not in per_layout or gap < per_layout[lay.label][0]:
                            per_layout[lay.label] = (gap, lay, label, lam, refs, key, o, shaped)
    if best is None:
        return None
    for near in sorted(per_layout.values(), key=lambda b: b[0]):  # the layout whose slip has a name, if any
        if _diagnose(near[1], ro, lams, near[7]) is not None:
            return ("differ", *_explain(name, ro, lams, near))
    return ("differ", *_explain(name, ro, lams, best))


def _references(lay: _Layout, c: torch.Tensor, ro: _Roles, lam: float, seed: torch.Tensor | None = None) \
        -> dict[str, torch.Tensor]:
    if lay.v is None:
        start = None
        if lay.v_next is not None:
            start = ro.next_values.reshape(-1).to(lay.r.dtype).expand(lay.r.shape[1]).clone()
        return _recursion(lay.r, None, None, c, ro.gamma, lam, start if seed is None else seed)
    return _recursion(lay.r, lay.v, lay.v_next, c, ro.gamma, lam, seed)


def _diagnose(lay: _Layout, ro: _Roles, lams: list[float], shaped: list[torch.Tensor]) -> str | None:
    """A named cause when the output is what a known slip gives."""
    def hit(refs: dict[str, torch.Tensor]) -> bool:
        return any(_close(o, x) for o in shaped for x in refs.values())

    conv = conventions(lay, ro.polarity)
    for lam in lams:
        if lay.v is not None and lay.v_next is not None and not bool((lay.v_next[-1] == 0).all()):
            for c in conv.values():
                if hit(_recursion(lay.r, lay.v, lay.v_next, c, ro.gamma, lam, seed=lay.v_next[-1].clone())):
                    return ("its backward carry starts from the bootstrap value V(s_T) where it starts from 0, "
                            "while V(s_T) also enters the last step's TD error: the bootstrap is counted twice, and "
                            "every step t gets an extra (gamma * lambda)^(T - t) * V(s_T)")
        if lay.flags is not None and lay.flags.shape[0] == lay.r.shape[0]:
            m = _mask(lay.flags, ro.polarity)
            both = m * torch.cat([m[1:], torch.ones_like(m[:1])])
            if hit(_references(lay, both, ro, lam)):
                return ("it cuts the bootstrap of step t both where step t ended the episode and where step t + 1 "
                        "did: the value of a state whose own step terminates is zeroed before the shift, so the "
                        "step before a terminal transition is bootstrapped from 0 instead of from that state's "
                        "value (only one of the two flags belongs to V(s_{t+1}), by the program's convention)")
            for c in conv.values():
                if c.shape == both.shape and hit(_recursion(lay.r, lay.v, lay.v_next, c, ro.gamma, lam,
                                                            carry_c=both)
                                                 if lay.v is not None else
                                                 _recursion(lay.r, None, None, c, ro.gamma, lam, carry_c=both)):
                    return ("it masks the backward carry a second time: A_{t+1} (G_{t+1}) is multiplied by the "
                            "continuation flag of step t + 1 as well as by that of step t, so the value carried "
                            "out of an episode's last step -- the one that holds its final reward -- never "
                            "reaches the step before it (the mask inside the recursion already stops the carry "
                            "at the episode's end)")
            if hit(_references(lay, torch.ones_like(lay.r), ro, lam)):
                return ("it ignores the episode-end flags it was given: the bootstrap and the carry cross episode "
                        "boundaries, so the rewards and values of the next episode leak into this one's targets")
    if lay.v is None:
        fwd = torch.zeros_like(lay.r)
        carry = torch.zeros_like(lay.r[0])
        for t in range(lay.r.shape[0]):
            # the bug's own form, built as a reference to name it:
            carry = lay.r[t] + ro.gamma * carry  # overt: ignore[returns-from-past-rewards]
            fwd[t] = carry
        if any(_close(o, fwd) for o in shaped):
            return ("it accumulates forward in time: each step gets the discounted sum of the rewards before it, "
                    "not after it")
        for o in shaped:
            cut = _carry_cut_steps(lay.r, o, ro.gamma)
            if cut:
                return (f"it drops the backward carry at step(s) {', '.join(map(str, cut[:6]))} (G_t = r_t there "
                        "although G_t+1 is not 0) where no episode-end flag it was given ends an episode (a mask of "
                        "the sequence's tokens or of its padding multiplied into the running return): the rewards "
                        "after those steps never reach the steps before them")
    return None


def _carry_cut_steps(r: torch.Tensor, o: torch.Tensor, gamma: float) -> list[int]:
    """Steps t after which ``o`` restarts the return (o_t = r_t where the carry G_t+1 is not 0) while every other
    step follows G_t = r_t + gamma G_t+1; empty when ``o`` is not of this form."""
    tol = 1e-4 * max(float(o.abs().max()), 1e-3) + 1e-6
    if not bool(((o[-1] - r[-1]).abs() <= tol).all()):
        return []
    cut = []
    for t in range(r.shape[0] - 1):
        carried = (o[t] - r[t] - gamma * o[t + 1]).abs() <= tol
        reset = (o[t] - r[t]).abs() <= tol
        if not bool((carried | reset).all()):
            return []
        if bool((reset & ~carried).any()):
            cut.append(t)
    return cut


def _explain(name: str, ro: _Roles, lams: list[float], best) -> tuple[str, str]:
    gap, lay, label, lam, refs, key, o, shaped = best
    ref = refs[key]
    diff = (o - ref).abs()
    t, n = divmod(int(diff.reshape(-1).argmax()), ref.shape[1])
    where = f"step {t}" + (f" of column {n}" if ref.shape[1] > 1 else "")
    g = f"gamma {ro.gamma:g} ({ro.names['gamma']})"
    lam_text = "" if lay.v is None else (f", lambda {lam:g} ({ro.names.get('lambda', 'TD(0) and Monte Carlo read')})"
                                         if ro.lam is not None else ", lambda 0 or 1 (none given)")
    what = "GAE" if lay.v is not None and ro.lam not in (None, 0.0) else \
        "the TD target" if lay.v is not None else "the discounted return"
    cause = _diagnose(lay, ro, lams, shaped) or (
        "it matches no accepted convention of the recursion (flags of step t or of observation t + 1, masks or "
        "dones, time on either axis, advantages or returns, standardised or not)")
    steps, cols = lay.r.shape
    message = (f"on the {steps} steps x {cols} columns of its call (rewards {ro.names['rewards']!r}"
               + (f", values {ro.names['values']!r}" if "values" in ro.names else "")
               + (f", flags {ro.names['flags']!r}" if "flags" in ro.names else "")
               + f", {g}{lam_text}; {lay.form}) it returns {float(o[t, n]):.4g} at {where} where {what} gives "
               f"{float(ref[t, n]):.4g} as {key} (nearest convention: {label}), and no convention is within "
               f"{gap:.3g} of every step: {cause}.")
    fix = (f"compute {name}() by the recursion delta_t = r_t + gamma * (1 - done_t) * V(s_t+1) - V(s_t), "
           "A_t = delta_t + gamma * lambda * (1 - done_t) * A_t+1, starting the carry at 0 after the last step and "
           "bootstrapping from V(s_T) only inside the last delta (returns = A + V), with done_t the flag of the step "
           "whose transition ended the episode; check it on a two-step episode whose targets you can write by hand")
    return message, fix
