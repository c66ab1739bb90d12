"""Guard on parameters that train at another learning rate than the one their group was given (slug
``group-lr-not-applied``; issue 33).

An invariant of every program that builds parameter groups with rates of their own (a small rate for a
pretrained backbone, a large one for a new head, layer-wise decay): the rate the optimizer applies to a
parameter is the one its group was given, up to a schedule that scales every group alike.  Two ways to
lose it, both silent, both seen in the wild:

- **a group that holds nothing.**  The filter that was to pick the group's parameters matched none
  (``name.startswith("backbone")`` on names that read ``model.backbone...``: huggingface/lerobot#280), so
  the group is empty and the parameters it was meant for sit in another group, at that group's rate;
- **rates collapsed to one.**  A schedule that writes one value into every group (a warm-up that takes
  group 0's peak for all of them: deepspeedai/DeepSpeed#8171; a hand-written ``g["lr"] = lr`` loop; a
  ``OneCycleLR`` or ``CyclicLR`` given one scalar rate) erases the distinct rates the groups were built
  with: the backbone trains at the head's rate, or the head at the backbone's.

What is proven, with host floats only (no device work), on the optimizers' checked steps:

- the rates each group was *given*: read when the optimizer is built (``Optimizer.__init__`` is patched
  under ``overt run``), else when the session first sees it (a group's ``initial_lr``, which a PyTorch
  scheduler sets to the rate it found, or its ``lr``);
- an empty group: at the optimizer's first checked step, a group with no parameters whose given rate
  (above 0) differs from the rate of the one group that holds every parameter, while every parameter of
  each watched model the optimizer trains is held by that group (a frozen backbone left out of the
  optimizer may be what the empty group was for, and beside two groups that hold parameters an empty
  third may be a catch-all nothing was left for: nothing is said then);
- a collapse: two or more groups holding parameters were given distinct rates above 0, and at
  :data:`STRIKES` checked steps of the warm-up (after the first update, so a warm-up from one common
  floor is not judged; a decay that ends on a common floor comes later in the run and is never looked at)
  every one of them has the same rate above 0.
"""

from __future__ import annotations

import ast
import linecache
import sys
import weakref
from typing import TYPE_CHECKING, Any

from overt.guards.check import Check
from overt.guards.where import is_user_file, short_location

if TYPE_CHECKING:
    from overt.guards.watched import OptInfo

STRIKES = 2  # warm-up checked steps with every group at one rate
SAME = 1e-9  # relative tolerance of "the same rate"


def _rate(g: dict) -> float | None:
    v = g.get("initial_lr", g.get("lr"))
    return float(v) if type(v) is float or (type(v) is int and not isinstance(v, bool)) else None


def _same(a: float, b: float) -> bool:
    return abs(a - b) <= SAME * max(abs(a), abs(b))


class _Given:
    __slots__ = ("opt", "rates", "sizes", "where", "strikes", "done_empty", "done_collapse")

    def __init__(self, opt: Any, where: str | None, *, built: bool) -> None:
        self.opt = weakref.ref(opt)
        groups = opt.param_groups
        # at construction ``lr`` is what was given (no scheduler has run yet); later, ``initial_lr``
        self.rates = [(float(g["lr"]) if type(g.get("lr")) is float else None) if built else _rate(g)
                      for g in groups]
        self.sizes = [len(g.get("params", ())) for g in groups]
        self.where = where
        self.strikes = 0
        self.done_empty = False
        self.done_collapse = False


class GroupRates(Check):
    name = "grouprates"

    def __init__(self, session):
        super().__init__(session)
        self.given: dict[int, _Given] = {}  # id(optimizer) -> the rates its groups were given

    def built(self, opt: Any, where: str | None) -> None:
        """``Optimizer.__init__`` returned (patched in :mod:`overt.guards.patches`)."""
        if len(getattr(opt, "param_groups", ())) < 2:
            return
        if len(self.given) > 64:
            self.given = {k: v for k, v in self.given.items() if v.opt() is not None}
        self.given[id(opt)] = _Given(opt, where, built=True)

    def seen(self, opt: Any) -> None:
        """The session came to know ``opt`` (:meth:`~overt.guards.session.GuardSession.add_optimizer`):
        unless its construction was seen, what its groups hold now is taken as what they were given."""
        self._record(opt)

    def _record(self, opt: Any) -> _Given | None:
        rec = self.given.get(id(opt))
        if rec is not None and rec.opt() is opt:
            return rec
        if len(getattr(opt, "param_groups", ())) < 2:
            return None
        rec = self.given[id(opt)] = _Given(opt, None, built=False)
        return rec

    def before_checked_step(self, oi: OptInfo, closure: bool) -> None:
        if oi.steps >= self.s.options.warmup_steps or len(oi.opt.param_groups) < 2:
            return
        rec = self._record(oi.opt)
        if rec is None or (rec.done_empty and rec.done_collapse):
            return
        groups = oi.opt.param_groups
        if len(groups) != len(rec.rates):  # a group added since: what it was given is not known
            rec.done_empty = rec.done_collapse = True
            return
        if not rec.done_empty:
            rec.done_empty = True
            self._empty(oi, rec, groups)
        if not rec.done_collapse and oi.steps >= 1:
            self._collapse(oi, rec, groups)

    # -- a group that holds nothing ------------------------------------------------------------
    def _empty(self, oi: OptInfo, rec: _Given, groups: list) -> None:
        sizes = [len(g.get("params", ())) for g in groups]
        full = [i for i, n in enumerate(sizes) if n]
        empty = [i for i, n in enumerate(sizes) if not n and rec.rates[i] is not None and rec.rates[i] > 0]
        if len(full) != 1 or not empty or rec.rates[full[0]] is None:
            return  # two groups that hold parameters: an empty third may be a catch-all nothing was left for
        held = {id(p) for i in full for p in groups[i]["params"]}
        models = [info for info in self.s.models.values()
                  if any(id(p) in held for p in info.module.parameters())]
        if not models or any(id(p) not in held for info in models for p in info.module.parameters()):
            return  # parameters of the model that no group holds: the empty group may have been for them
        for i in empty:
            rate = rec.rates[i]
            if any(_same(rate, rec.rates[j]) for j in full):
                continue  # the same rate as a group that holds parameters: nothing is lost by it
            j = full[0]
            where = rec.where or f"{oi.name} param_groups[{i}]"
            built = f" (built at {rec.where})" if rec.where else ""
            model = models[0].name
            self.s.report(
                "group-lr-not-applied",
                f"param group {i} of {oi.name}{built} was given lr={rate:.3g} but holds no parameters, "
                f"while every parameter of {model} sits in group {j} ({sizes[j]} tensors at "
                f"lr={rec.rates[j]:.3g}): the filter that was to pick group {i}'s parameters matched none of them, "
                f"so the parameters meant for lr={rate:.3g} train at another group's rate.",
                fix="build the group from what the filter should match and check it is not empty, e.g. "
                "'backbone' in name.split('.') instead of name.startswith('backbone') on model.named_parameters() "
                "names (they carry every parent's prefix); assert all(g['params'] for g in optimizer.param_groups)",
                where=where, key=f"empty:{id(rec)}:{i}",
            )
            return

    # -- rates collapsed to one ----------------------------------------------------------------
    def _collapse(self, oi: OptInfo, rec: _Given, groups: list) -> None:
        full = [i for i, g in enumerate(groups) if len(g.get("params", ()))]
        given = [rec.rates[i] for i in full]
        if len(full) < 2 or any(r is None or r <= 0 for r in given):
            rec.done_collapse = True
            return
        distinct = sorted({round(r, 15) for r in given})
        if len(distinct) < 2 or _same(distinct[0], distinct[-1]):
            rec.done_collapse = True
            return
        now = [groups[i].get("lr") for i in full]
        if not all(type(v) is float for v in now):
            rec.done_collapse = True  # a tensor rate: reading it could synchronise
            return
        if not (now[0] > 0 and all(_same(v, now[0]) for v in now)):
            return
        rec.strikes += 1
        if rec.strikes < STRIKES:
            return
        rec.done_collapse = True
        writer, line = _writer(oi.opt)
        given_txt = ", ".join(f"{r:.3g}" for r in given[:6]) + (" ..." if len(given) > 6 else "")
        by = writer or "something that writes the rates"
        where = line or rec.where or f"{oi.name} param_groups"
        self.s.report(
            "group-lr-not-applied",
            f"the {len(full)} parameter groups of {oi.name}"
            f"{' (built at ' + rec.where + ')' if rec.where else ''} were given distinct learning rates "
            f"({given_txt}), but at step {oi.steps} every one of them trains at lr={now[0]:.3g}: {by} sets one "
            "rate for all groups, so the per-group rates are lost (a pretrained backbone trains at the new head's "
            "rate, or the head at the backbone's).",
            fix="scale each group's own rate: keep one peak per group (e.g. [g['lr'] for g in "
            "optimizer.param_groups], not its [0]); in a loop written by hand, g.setdefault('peak_lr', g['lr']) "
            "then g['lr'] = g['peak_lr'] * factor; give OneCycleLR/CyclicLR a list with one rate per group",
            where=where, key=f"collapse:{id(rec)}",
        )


def _writer(opt: Any) -> tuple[str | None, str | None]:
    """The object that drives ``opt``'s rates, found in the user's frames (a scheduler whose ``optimizer``
    is ``opt``), and the line of its code (or of the user's frame) that writes ``["lr"]``."""
    frame = sys._getframe(1)
    first_user = None
    while frame is not None:
        code = frame.f_code
        if is_user_file(code.co_filename):
            if first_user is None:
                first_user = frame
            for name, value in list(frame.f_locals.items())[:200]:
                try:
                    drives = value is not opt and getattr(value, "optimizer", None) is opt
                except Exception:  # noqa: BLE001  a property of the user's object that raises: not a scheduler
                    drives = False
                if not drives:
                    continue
                step = getattr(type(value), "step", None)
                fcode = getattr(step, "__code__", None)
                label = f"{type(value).__name__} (`{name}`)"
                if fcode is not None and is_user_file(fcode.co_filename):
                    line = _lr_write(fcode.co_filename, fcode.co_firstlineno)
                    return label, short_location(fcode.co_filename, line or fcode.co_firstlineno)
                return label, None
        frame = frame.f_back
    if first_user is not None:
        fn = first_user.f_code
        line = _lr_write(fn.co_filename, None if fn.co_name == "<module>" else fn.co_firstlineno)
        if line is not None:
            return "a loop written by hand", short_location(fn.co_filename, line)
    return None, None


def _lr_write(filename: str, first: int | None, end: int | None = None) -> int | None:
    """The first line of ``filename`` that assigns ``x["lr"]`` inside the function that starts at line
    ``first`` (before line ``end`` when given), or at the module level (``first`` None)."""
    lines = linecache.getlines(filename)
    if not lines:
        return None
    try:
        tree = ast.parse("".join(lines))
    except (SyntaxError, ValueError):
        return None
    funcs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if first is None:
        scope: ast.AST = tree
        nested = funcs
    else:
        scope_f = next((f for f in funcs if f.lineno == first or any(d.lineno == first for d in f.decorator_list)),
                       None)
        if scope_f is None:
            return None
        scope = scope_f
        nested = [f for f in funcs if f is not scope_f]
    best = None
    for node in ast.walk(scope):
        targets = node.targets if isinstance(node, ast.Assign) else [node.target] if isinstance(
            node, ast.AugAssign) else []
        for t in targets:
            if not (isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Constant) and t.slice.value == "lr"):
                continue
            if end is not None and node.lineno >= end:
                continue
            if any(f.lineno <= node.lineno <= (f.end_lineno or f.lineno) for f in nested
                   if first is None or f.lineno > first):
                continue  # inside a nested function (or, at the module level, inside any function)
            if best is None or node.lineno < best:
                best = node.lineno
    return best
