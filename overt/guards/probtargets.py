"""Guard on probability targets that are not distributions (slug ``probability-target-not-distribution``; issue 33,
session 54).

The premise, true of every correct program that fits a categorical distribution: the target a soft cross-entropy or
a divergence is taken against is itself a distribution over the same classes -- non-negative, each row summing to
one. A teacher's softmax, a smoothed one-hot, a mixup of two one-hots and a categorical (C51) projection of a
next-state return distribution all are. A target whose rows lose mass (a projection that drops the atoms landing
exactly on the support: ``l == u`` weights both 0) or create it (both neighbours moved and weighted 1 each) is not:
the cross-entropy is then minimised by no distribution the model can output, the model learns a distorted (or, with
no mass at all, no) target while every loss looks ordinary.

Where it is seen, on checked steps only:

- ``F.cross_entropy`` with probability targets (a floating target of the input's shape: classes on dimension 1) and
  ``F.kl_div`` on 2-D inputs (classes on dimension 1; not under ``log_target``, left to the domain check), at the loss
  call;
- a cross-entropy written by hand, read off autograd's graph of the loss backwarded (the wrapper of
  ``torch.autograd.backward`` of :mod:`overt.guards.termscale`): a product of a constant tensor (no gradient) with
  ``log_softmax`` of a model's output (or ``log`` of its ``softmax``) of the same shape, or through indexing and
  views with the classes last (an action's atoms picked out of ``(N, actions, atoms)``): the ``-(target *
  log_softmax(logits)).sum(1)`` of distributional critics and hand-made distillation. The classes are
  ``log_softmax``'s dimension.

Judged on the device, read with the session's deferred reads: rows with at least two non-zero entries (a one-hot
scaled by a sample weight or an advantage is a weighted class index, not a distribution: not judged) whose sum is
off one by more than :data:`TOL`, or a hand-written target that is zero everywhere while the whole loss backwarded
is exactly 0 (the objective is that dead term; a placeholder of zeros beside other terms is silent). Silent on
targets with negative entries (not probabilities: a signed weight), on 0/1 targets (multi-hot labels, a mask), on
rows of zero mass next to rows of mass (rows masked out on purpose), on fewer than three classes, and on a
hand-written product whose row sum is divided by a tensor on its way to the loss (a weight normalised after the sum:
``(w * logp).sum(1) / w.sum(1)``). Reported, once per loss line, after :data:`LOOKS` checked looks found most judged
rows off one (or no mass at all) and none found every judged row at one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import assignment_location, user_frame, user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession

TOL = 0.02  # a row's sum farther than this from one is not a distribution's (float and fp16 sums stay closer)
MAX_LOOKS = 4  # checked looks queued per site at most (a target that cannot be judged is not looked at again)
LOOKS = 2  # checked looks of a site that must all be off one before it is reported
MIN_CLASSES = 3  # classes on the distribution's dimension: two-class targets are left to the binary checks
MIN_ROWS = 4  # judged rows (two non-zero entries or more) a look needs to say anything of the rows' sums
MAX_NODES = 300  # autograd nodes walked from the loss (a watched model's graph is not entered)
QUIET = 3  # checked backwards in a row with no unsettled hand-written soft cross-entropy: the walk is made rarely
AGAIN = 8  # then on every AGAIN-th checked backward only (a distillation term that starts with a later task)
MAX_SITES = 8
_THROUGH = frozenset(("NegBackward0", "CloneBackward0", "ToCopyBackward0", "MulBackward1", "DivBackward1"))
_ONE_SIDED = frozenset(("SubBackward0", "RsubBackward0", "AddBackward0"))  # t.log() - logp: one side constant
_EPS = frozenset(("AddBackward1", "ClampMinBackward0", "ClampBackward1"))  # log(p + eps), log(p.clamp(min=eps))
#: indexing and views between the log-probabilities and the product (the class dimension must stay the last)
_MOVES = frozenset(("IndexBackward0", "GatherBackward0", "SelectBackward0", "SqueezeBackward0", "SqueezeBackward1",
                    "UnsqueezeBackward0", "ViewBackward0", "UnsafeViewBackward0", "ReshapeAliasBackward0",
                    "SliceBackward0"))
MAX_UP = 8  # nodes walked from the product to the log-probabilities


def _log_probs(fn: Any) -> tuple[Any, int, bool] | None:
    """(the node, its class dimension, whether indexing or a view came between) when ``fn`` is, through negations,
    constant factors, indexing (an action's distribution picked out of ``(N, A, atoms)``) and views, a
    ``log_softmax`` or the ``log`` of a ``softmax`` (plus a constant ``eps``, or clamped), else None."""
    logged = moved = False
    for _ in range(MAX_UP):
        kind = type(fn).__name__
        if kind == "LogSoftmaxBackward0":
            return fn, int(fn._saved_dim), moved
        if kind == "SoftmaxBackward0":
            return (fn, int(fn._saved_dim), moved) if logged else None
        nxt = [n for n, _ in fn.next_functions]
        if kind == "LogBackward0":
            logged = True
        elif kind in _EPS:
            if not logged:
                return None
        elif kind in _MOVES:
            moved = True
        elif kind in _ONE_SIDED:
            if len(nxt) != 2 or (nxt[0] is None) == (nxt[1] is None):
                return None
            nxt = [nxt[0] if nxt[0] is not None else nxt[1]]
        elif kind not in _THROUGH:
            return None
        if not nxt or nxt[0] is None:
            return None
        fn = nxt[0]
    return None


def _constant_side(fn: Any) -> tuple[torch.Tensor, Any] | None:
    """(the constant, the other side's node) of a ``MulBackward0`` of a constant tensor and a computed one."""
    nxt = [n for n, _ in fn.next_functions]
    if len(nxt) != 2 or (nxt[0] is None) == (nxt[1] is None):
        return None
    try:
        const = fn._saved_self if nxt[0] is None else fn._saved_other
    except Exception:  # noqa: BLE001  a freed or unsaved operand
        return None
    if not isinstance(const, torch.Tensor) or not const.is_floating_point() or const.dim() == 0:
        return None
    return const, nxt[1] if nxt[0] is None else nxt[0]


def _normaliser(fn: Any) -> bool:
    """Whether ``fn`` divides by a tensor of more than one element (a per-row normaliser of a weighted sum)."""
    if type(fn).__name__ != "DivBackward0":
        return False
    try:
        other = fn._saved_other
    except Exception:  # noqa: BLE001
        return True  # cannot tell: treat as normalised (silent)
    return not isinstance(other, torch.Tensor) or other.numel() > 1


def hand_written(root: Any, outputs: dict[int, Any]) -> list[tuple[torch.Tensor, int]]:
    """(target, class dimension) of each product of a constant and the log-probabilities of a model's output in
    the loss's graph from ``root``, whose row sum is not normalised by a tensor on its way to the root."""
    seen = {root}
    todo: list[tuple[Any, bool]] = [(root, False)]
    found: list[tuple[torch.Tensor, int]] = []
    while todo and len(seen) < MAX_NODES:
        fn, normed = todo.pop()
        if id(fn) in outputs and outputs[id(fn)] is fn:
            continue  # a watched model's output: its graph is the model's, not the loss's
        kind = type(fn).__name__
        if kind in ("LogSoftmaxBackward0", "SoftmaxBackward0", "AccumulateGrad"):
            continue
        normed = normed or _normaliser(fn)
        if kind == "MulBackward0" and not normed:
            got = _constant_side(fn)
            lp = _log_probs(got[1]) if got is not None else None
            if got is not None and lp is not None:
                node, dim, moved = lp
                const = got[0]
                try:
                    result = node._saved_result
                except Exception:  # noqa: BLE001
                    result = None
                if not isinstance(result, torch.Tensor):
                    continue
                if not moved and tuple(result.shape) == tuple(const.shape):
                    found.append((const, dim % const.dim()))
                elif moved and const.dim() >= 2 and dim % result.dim() == result.dim() - 1 \
                        and const.shape[-1] == result.shape[-1]:
                    found.append((const, const.dim() - 1))  # classes last, before and after the indexing
                continue
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append((nxt, normed))
    return found


def _row_stats(t: torch.Tensor, dim: int) -> torch.Tensor:
    """On the device: min, rows, judged rows (two non-zero entries or more), judged rows off one, rows of zero mass,
    whether every entry is 0 or 1, the judged rows' smallest and largest sums, whether a 2-D target's sums over
    its other dimension (its columns, for classes on dimension 1) are all one."""
    x = t.detach().float().movedim(dim, -1).reshape(-1, t.shape[dim])
    x = torch.where(x.max() <= 0, -x, x)  # ``-t * logp``: the minus sign went to the target (none of it positive)
    s = x.sum(1)
    multi = (x != 0).sum(1) >= 2
    off = multi & ((s - 1).abs() > TOL)
    inf = torch.tensor(float("inf"), device=x.device)
    if t.dim() == 2:  # a distribution over the other dimension (softmax over the batch): every column sums to one
        other = ((x.sum(0) - 1).abs() <= TOL).all().float()  # x: classes last, so its columns are that dimension
    else:
        other = torch.zeros((), device=x.device)
    return torch.stack([x.min(), torch.tensor(float(x.shape[0]), device=x.device), multi.sum().float(),
                        off.sum().float(), (s.abs() <= 1e-6).sum().float(), ((x == 0) | (x == 1)).all().float(),
                        torch.where(multi, s, inf).min(), torch.where(multi, s, -inf).max(), other])


def _assigned(frame: Any, target: torch.Tensor) -> tuple[str, str] | None:
    """(the name, ``file:line`` of its last assignment above the frame's line) of the variable of ``frame`` that
    holds ``target`` (the same storage and shape), when the user's code named it."""
    try:
        ptr, shape = target.data_ptr(), tuple(target.shape)
    except Exception:  # noqa: BLE001
        return None
    for name, val in list(frame.f_locals.items()):
        try:
            same = isinstance(val, torch.Tensor) and not name.startswith("_") and val.data_ptr() == ptr \
                and tuple(val.shape) == shape
        except Exception:  # noqa: BLE001  a tensor without storage (sparse, meta, a subclass)
            same = False
        if same:
            return name, assignment_location(frame, name)
    return None


class ProbTargetChecks(Check):
    name = "probtargets"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.looks: dict[str, list[str]] = {}  # site -> the kind of each look ("off", "empty")
        self.asked: dict[str, int] = {}  # site -> looks queued
        self.fine: set[str] = set()  # sites whose targets were distributions on a look: never reported
        self.done: set[str] = set()
        self.quiet = 0
        self.retired = False  # QUIET checked backwards with nothing to look at: the walk is made only now and then
        self.backwards = 0  # checked backwards seen
        #: shapes of the targets the library losses of this backward's step were given (their own graphs hold the
        #: same product with log_softmax: looked at once, at the call)
        self.library: set[tuple[int, ...]] = set()

    # -- library losses ------------------------------------------------------------------------
    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        if name not in ("cross_entropy", "kl_div") or not isinstance(target, torch.Tensor):
            return
        if not target.is_floating_point() or target.requires_grad or tuple(target.shape) != tuple(inp.shape) \
                or target.dim() < 2 or target.shape[1] < MIN_CLASSES or target.device.type == "meta":
            return
        if name == "kl_div":
            if target.dim() != 2:
                return
            log_target = kwargs.get("log_target", args[5] if len(args) > 5 else False)
            if log_target:
                # probabilities given where log-probabilities are declared are the domain check's finding
                # (softmax-before-cross-entropy names that cause); reading exp() of them here would name its symptom
                self.library.add(tuple(target.shape))  # nor is it looked at again in the backwarded graph
                return
        loc = self.s.losses.site() or f"F.{name}"
        self.library.add(tuple(target.shape))
        self._look(target, 1, loc, f"{loc}#F.{name}", f"the target of F.{name} at {loc}")

    # -- a cross-entropy written by hand -------------------------------------------------------
    def on_backward(self, tensors: Any, outputs: dict[int, Any]) -> None:
        """Called by the backward wrapper of a checked step (before termscale forgets the step's outputs)."""
        try:
            self._walk(tensors, outputs)
        finally:
            self.library.clear()

    def _walk(self, tensors: Any, outputs: dict[int, Any]) -> None:
        self.backwards += 1
        if len(self.done) >= MAX_SITES or self.retired and self.backwards % AGAIN:
            return  # a quiet loss is looked at again every AGAIN-th checked backward (a term added later: LwF's)
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        root = getattr(tensors, "grad_fn", None)
        if root is None or tensors.numel() != 1 or not outputs:
            return
        found = [(t, d) for t, d in hand_written(root, outputs)
                 if t.shape[d] >= MIN_CLASSES and tuple(t.shape) not in self.library]
        loc = (user_location() or "the backward call") if found else ""
        found = [(t, d) for t, d in found if not self._settled(f"{loc}#{d}:{t.shape[d]}")]
        if not found:  # nothing (more) to look at: after QUIET such backwards in a row the walk is made rarely
            self.quiet += 1
            self.retired = self.quiet >= QUIET
            return
        self.quiet = 0
        self.retired = False
        frame = user_frame()
        for t, d in found[:2]:
            named = _assigned(frame, t) if frame is not None else None
            what = f"the target that the loss backwarded at {loc} multiplies with log_softmax"
            if named:
                what = f"the target `{named[0]}`" + (f" (assigned at {named[1]})" if named[1] else "") + \
                    f", which the loss backwarded at {loc} multiplies with log_softmax,"
            self._look(t, d, loc, f"{loc}#{d}:{t.shape[d]}", what, tensors)  # one site per line and class count

    # -- judging ---------------------------------------------------------------------------------
    def _settled(self, site: str) -> bool:
        """Whether ``site`` needs no more looks: reported, seen to be a distribution, or looked at enough."""
        return site in self.done or site in self.fine or self.asked.get(site, 0) >= MAX_LOOKS

    def _look(self, target: torch.Tensor, dim: int, loc: str, site: str, what: str, loss: Any = None) -> None:
        """Queue one look at ``target`` (classes on ``dim``) for the loss line ``loc``, keyed ``site``; ``loss``: the
        backwarded loss the target is a part of (a target with no mass is reported only when that loss is 0: the
        whole objective is then the dead term, not one placeholder term beside others)."""
        if self._settled(site):
            return
        self.asked[site] = self.asked.get(site, 0) + 1
        step = self.s.step
        stats = _row_stats(target, dim)
        if isinstance(loss, torch.Tensor) and loss.numel() == 1 and loss.device == stats.device:
            whole = loss.detach().float().reshape(1).abs()
        else:
            whole = torch.full((1,), float("nan"), device=stats.device)
        self.s.defer(torch.cat((stats, whole)), self._callback(loc, site, what, dim, tuple(target.shape), step))

    def _callback(self, loc: str, site: str, what: str, dim: int, shape: tuple, step: int):
        def callback(vals: list[float]) -> None:
            lo, rows, multi, off, zero, binary, s_lo, s_hi, other, whole = vals
            if site in self.done or site in self.fine:
                return
            if other:
                self.fine.add(site)  # a distribution over the other axis
                return
            if zero == rows:
                if not whole == 0:  # another term carries the objective (or the loss is not known): a placeholder
                    return
                kind = "empty"
            elif lo < -1e-6 or binary or multi < MIN_ROWS:
                return  # not probabilities, multi-hot labels, or too few rows to judge
            elif off == 0:
                self.fine.add(site)
                return
            elif off * 2 >= multi:
                kind = "off"
            else:
                return
            kinds = self.looks.setdefault(site, [])
            kinds.append(kind)
            if len(kinds) >= LOOKS:
                self.done.add(site)
                self._report(what, dim, shape, kind, int(off), int(multi), s_lo, s_hi, step, loc, site)

        return callback

    def _report(self, what: str, dim: int, shape: tuple, kind: str, off: int, multi: int, s_lo: float, s_hi: float,
                step: int, loc: str, site: str) -> None:
        if kind == "empty":
            seen = (f"{what} is zero everywhere (shape {list(shape)}), on {LOOKS} checked steps: a probability target "
                    "with no mass at all, so the loss is 0 and passes no gradient; the model learns nothing from it")
        else:
            seen = (f"{off} of {multi} rows (shape {list(shape)}, classes on dimension {dim}) of {what} sum to "
                    f"between {s_lo:.3g} and {s_hi:.3g}, not 1, on {LOOKS} checked steps: mass is "
                    + ("lost" if s_hi < 1 else "created" if s_lo > 1 else "lost and created")
                    + " where the target was built")
        msg = (seen + ". A soft cross-entropy or divergence fits the model's distribution to its target, and a target "
               "that is not a distribution (non-negative, each row summing to one) is fitted as if it were: the "
               "model learns a distorted target while the loss looks like any other (a categorical projection that "
               "drops the atoms landing exactly on the support, or moves both neighbours of one).")
        fix = ("build the target so that each row sums to one: in a categorical (C51) projection, where an atom lands "
               "exactly on the support (l == u) give its whole probability to that atom (move l down, then test u "
               "against the moved l); normalise soft labels, or check target.sum(dim) == 1 once.")
        self.s.report("probability-target-not-distribution", msg, where=loc, key=site,
                      step=step, fix=fix)
