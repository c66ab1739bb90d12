"""Guard on the terms of a summed loss weighted against each other by a factor the objective does not mean
(slug ``loss-terms-misscaled``; issue 33).

An invariant of a loss made of several terms: each term's weight in the sum is the one the objective
asks for, and nothing else -- not an accident of how each term was reduced.  Two ways to break it,
both read off autograd's graph of the loss that is backwarded, on the host, on checked steps:

- **one term averaged over the batch, another summed over it.**  The root of the backwarded loss is
  split into its additive terms (through ``+``, ``-``, unary minus and multiplication or division by a
  constant), each with its coefficient.  A term whose reduction is a mean over a tensor of ``N >=
  MIN_BATCH`` rows (``.mean()``, a loss with ``reduction="mean"``) next to one whose reduction is a sum
  over a tensor of as many rows (``.sum()``, ``reduction="sum"``) weighs each sample ``N`` times less,
  times the ratio of their coefficients.  Reported when that ratio does not make up for the batch (the
  summed term's coefficient is at least ``RATIO`` times the averaged one's: ``(rec_mean + kl_sum) / N``,
  a VAE whose reconstruction is ``F.mse_loss(recon, x)`` and whose KL is summed), and both terms are
  functions of a watched model's output on this step and share a parameter a watched optimizer holds.
  A summed term divided by the batch size (``kl.sum() / len(x)``, ``reduction="batchmean"``) or given a
  small weight is silent: the weight may be the user's.
- **a temperature-softened distillation term without T².**  A term whose graph applies
  ``log_softmax`` to logits divided by a constant ``T >= MIN_T`` (Hinton's soft targets) next to a
  hard-label cross-entropy on the same logits, undivided.  The soft term's gradients shrink as
  ``1 / T²``: its weight in the sum must be multiplied by ``T²`` to keep its share as ``T`` changes.
  Reported when the soft term's coefficient (the batch-size division of ``batchmean`` left out) is at
  most 1: no factor of ``T²`` is in it.

Nothing reads the device: the coefficients are the constants autograd saved (a constant on an
accelerator, such as a gradient scaler's scale, is an unknown factor, and two terms are compared only
when they share the same unknown factors).  The wrapper of ``torch.autograd.backward`` (what
``Tensor.backward`` calls) is installed only while a checked step lasts (:func:`arm`).
"""

from __future__ import annotations

import functools
import math
from typing import TYPE_CHECKING, Any, Callable

import torch

from overt.guards.check import Check
from overt.guards.watched import output_tensors
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

MIN_BATCH = 16  # rows of the reduced tensors: fewer and a batch-sum's weight is not far from a mean's
RATIO = 0.25  # the summed term's coefficient over the averaged one's at and above which nothing makes up for N
MIN_T = 3.0  # a distillation temperature at and above which a missing T² changes the soft term's share 9-fold
MAX_TERMS = 16  # additive terms followed from the root
MAX_CONCAT = 4  # per-sample tensors of one batch concatenated into a term's rows
MAX_NODES = 20000  # autograd nodes walked per term (model outputs and parameters reached)
MAX_SOFT = 60  # nodes walked per term looking for a log_softmax of divided logits
MAX_OUTPUTS = 64  # model outputs of a step remembered
MAX_INNER = 6  # nodes followed below a term's reduction looking for constant factors
_SHAPE = ("ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0", "SqueezeBackward0",
          "SqueezeBackward1", "UnsqueezeBackward0", "CloneBackward0", "SliceBackward0", "SelectBackward0")

#: the nodes a sum of weighted terms ends in
_COMBINING = frozenset(("AddBackward0", "SubBackward0", "MulBackward0", "DivBackward0", "NegBackward0",
                        "MulBackward1", "DivBackward1"))
_ORIG: Any = None  # torch.autograd.backward
_WRAP: Any = None


class _Term:
    """One additive term of a loss: its node, its coefficient and the constant factors on the way there."""

    __slots__ = ("node", "coef", "factors", "unknown", "inner")

    def __init__(self, node: Any, coef: float, factors: tuple, unknown: frozenset):
        self.node = node
        self.coef = coef
        self.factors = factors  # ("mul" | "div", value) from the root down
        self.unknown = unknown  # ids of nodes whose constant lives on an accelerator (not read)
        self.inner: tuple = ()  # the factors applied to the reduced tensor's elements (:func:`inner_factors`)


def _constant(t: Any) -> tuple[float | None, bool]:
    """The value of a one-element constant saved by a Mul/Div node: (value, known); (None, False) when
    it is not one element."""
    if not isinstance(t, torch.Tensor) or t.numel() != 1:
        return None, False
    if t.device.type != "cpu":
        return None, True  # reading it would wait for the device: an unknown factor
    try:
        return float(t), True
    except Exception:  # noqa: BLE001  a fake or meta tensor
        return None, False


def additive_terms(root: Any) -> list[_Term] | None:
    """The additive terms of the loss whose ``grad_fn`` is ``root`` (None: more than :data:`MAX_TERMS`)."""
    out: list[_Term] = []
    todo: list[_Term] = [_Term(root, 1.0, (), frozenset())]
    while todo:
        if len(out) + len(todo) > MAX_TERMS:
            return None
        t = todo.pop()
        node, kind = t.node, type(t.node).__name__
        nxt = node.next_functions
        if kind in ("AddBackward0", "SubBackward0") and len(nxt) == 2:
            alpha = getattr(node, "_saved_alpha", 1)
            alpha = float(alpha) if isinstance(alpha, (int, float)) else 1.0
            sign = -1.0 if kind == "SubBackward0" else 1.0
            if nxt[0][0] is not None:
                todo.append(_Term(nxt[0][0], t.coef, t.factors, t.unknown))
            if nxt[1][0] is not None:
                todo.append(_Term(nxt[1][0], t.coef * alpha * sign, t.factors, t.unknown))
            continue
        if kind == "NegBackward0" and nxt and nxt[0][0] is not None:
            todo.append(_Term(nxt[0][0], -t.coef, t.factors, t.unknown))
            continue
        if kind in ("MulBackward1", "DivBackward1") and len(nxt) == 1 and nxt[0][0] is not None:
            value = getattr(node, "_saved_other", None)  # a Python number (a loss's own division by its count)
            if isinstance(value, (int, float)) and value != 0 and math.isfinite(value):
                op = "mul" if kind == "MulBackward1" else "div"
                coef = t.coef * value if op == "mul" else t.coef / value
                todo.append(_Term(nxt[0][0], coef, t.factors + ((op, float(value)),), t.unknown))
            else:
                out.append(t)
            continue
        if kind in ("MulBackward0", "DivBackward0") and len(nxt) == 2:
            a, b = nxt[0][0], nxt[1][0]
            if kind == "MulBackward0" and (a is None) != (b is None):
                child = a if a is not None else b
                value, known = _constant(getattr(node, "_saved_other" if a is not None else "_saved_self", None))
                op = "mul"
            elif kind == "DivBackward0" and a is not None and b is None:
                child = a
                value, known = _constant(getattr(node, "_saved_other", None))
                op = "div"
            else:
                out.append(t)
                continue
            if value is None and not known:
                out.append(t)  # a tensor factor: the term stops here
                continue
            if value is None:
                todo.append(_Term(child, t.coef, t.factors, t.unknown | {id(node)}))
            elif value != 0 and math.isfinite(value):
                coef = t.coef * value if op == "mul" else t.coef / value
                todo.append(_Term(child, coef, t.factors + ((op, value),), t.unknown))
            continue
        out.append(t)
    return out


def reduction(node: Any) -> tuple[str, tuple[int, ...]] | None:
    """How a term's node reduces to a scalar: ("mean" | "sum", the reduced tensor's shape), or None."""
    kind = type(node).__name__
    try:
        if kind in ("MeanBackward0", "SumBackward0"):
            return ("mean" if kind.startswith("Mean") else "sum"), tuple(int(n) for n in node._saved_self_sym_sizes)
        if kind in ("MeanBackward1", "SumBackward1"):
            sizes = tuple(int(n) for n in node._saved_self_sym_sizes)
            dims = {int(d) % len(sizes) for d in node._saved_dim} if sizes else set()
            if sizes and dims == set(range(len(sizes))) and not node._saved_keepdim:
                return ("mean" if kind.startswith("Mean") else "sum"), sizes
            return None
        if kind == "PowBackward0" and getattr(node, "_saved_exponent", None) == 2:
            norm = node.next_functions[0][0] if node.next_functions else None
            if (type(norm).__name__ == "LinalgVectorNormBackward0" and norm._saved_ord == 2
                    and norm._saved_dim is None and isinstance(norm._saved_self, torch.Tensor)):
                return "sum", tuple(norm._saved_self.shape)  # a squared L2 norm: a sum of squares
            return None
        red = getattr(node, "_saved_reduction", None)
        if red in (1, 2):
            saved = node._saved_self
            if isinstance(saved, torch.Tensor):
                return ("mean" if red == 1 else "sum"), tuple(saved.shape)
    except Exception:  # noqa: BLE001  a node whose saved values were freed (retain_graph=False, backwarded)
        return None
    return None


def inner_factors(node: Any) -> tuple:
    """The constant factors applied elementwise to the tensor a term's reduction ``node`` reduces (``(x / n).sum()``,
    ``torch.sum(per_sample / B)``): a number that multiplies or divides every element before a sum or a mean weighs
    the term exactly as one after it.  Followed through shape nodes and one-element host constants, at most
    :data:`MAX_INNER` nodes down; a tensor factor, a device constant or any other operation ends the walk.  A
    squared norm's reduction (its ``PowBackward0``) has none."""
    kind = type(node).__name__
    if kind not in ("MeanBackward0", "SumBackward0", "MeanBackward1", "SumBackward1") or not node.next_functions:
        return ()
    found: list[tuple[str, float]] = []
    fn = node.next_functions[0][0]
    for _ in range(MAX_INNER):
        if fn is None:
            break
        kind = type(fn).__name__
        nxt = fn.next_functions
        if kind in _SHAPE and nxt:
            fn = nxt[0][0]
            continue
        value: Any = None
        child = None
        if kind in ("MulBackward1", "DivBackward1") and len(nxt) == 1:
            value, child = getattr(fn, "_saved_other", None), nxt[0][0]
        elif kind == "MulBackward0" and len(nxt) == 2 and (nxt[0][0] is None) != (nxt[1][0] is None):
            a = nxt[0][0]
            value, _ = _constant(getattr(fn, "_saved_other" if a is not None else "_saved_self", None))
            child = a if a is not None else nxt[1][0]
        elif kind == "DivBackward0" and len(nxt) == 2 and nxt[0][0] is not None and nxt[1][0] is None:
            value, _ = _constant(getattr(fn, "_saved_other", None))
            child = nxt[0][0]
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value == 0 or not math.isfinite(value):
            break
        found.append(("mul" if kind.startswith("Mul") else "div", float(value)))
        fn = child
    return tuple(found)


def batch_order(t: _Term, r: tuple[str, tuple[int, ...]], n: int | None = None) -> tuple[int, float]:
    """How a term scales with its batch of ``N`` rows, and the rest of its weight: (the power of ``N``, the
    coefficient with the divisions and multiplications by ``N`` taken out).  A mean over the rows is -1, a sum
    0; each division of the term by ``N`` on its way to the root (``reduction="batchmean"``, ``/ len(x)``)
    takes one off.  ``n``: the batch size when the term's rows are a multiple of it (a concatenation of
    several per-sample tensors), else its own rows."""
    n = r[1][0] if n is None else n
    order = -1 if r[0] == "mean" else 0
    rest = abs(t.coef)
    for op, value in t.factors:
        if value and abs(1.0 / value - n) < 1e-6 * n:  # a product with 1 / N is a division by N
            op, value = ("div" if op == "mul" else "mul"), 1.0 / value
        if abs(value) == n or abs(abs(value) - n) < 1e-6 * n:
            order += 1 if op == "mul" else -1
            rest = rest / n if op == "mul" else rest * n
    return order, rest


class TermScaleChecks(Check):
    name = "termscale"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.outputs: dict[int, Any] = {}  # id(grad_fn) -> grad_fn of a watched model's output this step
        self.losses: dict[int, tuple[Any, str, str]] = {}  # id(loss input's grad_fn) -> (it, F.name, line)
        self.done: set[str] = set()
        self.mixed: dict[str, int] = {}  # backward line -> checked steps on which a batch-sum and -mean mixed
        self.at = -1  # the step whose graph nodes outputs and losses hold

    # -- what the step made -------------------------------------------------------------------
    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if failed or not self.s.armed or not torch.is_grad_enabled():
            return
        self._this_step()
        if len(self.outputs) >= MAX_OUTPUTS:
            return
        for t in output_tensors(output):
            fn = t.grad_fn
            if fn is not None:
                self.outputs[id(fn)] = fn

    def _this_step(self) -> None:
        """The graph nodes kept are this step's only: a step whose optimizer hook did not end it (another
        optimizer's clock, a sharded model's wrapper) must not keep an older step's graph alive (graph-leak)."""
        if self.at != self.s.step:
            self.outputs.clear()
            self.losses.clear()
            self.at = self.s.step

    def on_checked_loss(self, name: str, inp: Any, target: Any, args: tuple, kwargs: dict) -> None:
        self._this_step()
        fn = inp.grad_fn
        if fn is not None and len(self.losses) < MAX_OUTPUTS:
            self.losses[id(fn)] = (fn, name, self.s.losses.locs.get(name, ""))  # the loss checks' line of F.name

    def after_checked_step(self, oi: OptInfo) -> None:
        self.outputs.clear()
        self.losses.clear()

    def remove_hooks(self) -> None:
        self.outputs.clear()
        self.losses.clear()

    # -- the backward of a checked step -------------------------------------------------------
    def on_backward(self, tensors: Any) -> None:
        """Weigh the terms of the loss being backwarded; then forget the step's graph nodes, which this
        backward consumes (kept longer, they would keep the step's graph alive: graph-leak)."""
        try:
            self._weigh(tensors)
        finally:
            self.outputs.clear()
            self.losses.clear()

    def _weigh(self, tensors: Any) -> None:
        if not self.outputs or len(self.done) > 8:
            return
        if isinstance(tensors, (list, tuple)):
            tensors = tensors[0] if len(tensors) == 1 else None
        fn = getattr(tensors, "grad_fn", None)
        if fn is None or type(fn).__name__ not in _COMBINING or tensors.numel() != 1:
            return  # one term (a loss as it came out of its function): nothing to weigh against another
        terms = additive_terms(fn)
        if terms is None or len(terms) < 2:
            return
        loc = user_location(4) or "the backward call"
        if loc in self.done:
            return
        reds = [(t, reduction(t.node)) for t in terms if t.coef != 0]
        for t, r in reds:
            if r is not None:
                t.inner = inner_factors(t.node)
                for op, value in t.inner:  # (x / n).sum() weighs the term as x.sum() / n
                    t.coef = t.coef * value if op == "mul" else t.coef / value
                    t.factors = t.factors + ((op, value),)
        if self._batch_mix(reds, loc) or self._averaged_twice(reds, loc) or self._soft_without_t2(terms, loc):
            self.done.add(loc)

    # -- a batch mean next to a batch sum ------------------------------------------------------
    def _batch_mix(self, reds: list[tuple[_Term, Any]], loc: str) -> bool:
        rows: list[tuple[_Term, tuple[str, tuple[int, ...]], int, float]] = []
        for t, r in reds:
            if r is not None and r[1] and r[1][0] >= MIN_BATCH:
                order, rest = batch_order(t, r)
                rows.append((t, r, order, rest))
        for b, rb, ob, wb in rows:
            for a, ra, oa, wa in rows:
                if ra[1][0] != rb[1][0] or a.unknown != b.unknown or ob <= oa or wb < RATIO * wa:
                    continue
                held = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
                out_a, leaves_a = self._reach(a.node)
                out_b, leaves_b = self._reach(b.node)
                if not (out_a and out_b and leaves_a & leaves_b & held):
                    continue
                if ra[0] == rb[0] and any(abs((v if op == "div" else 1.0 / v) - ra[1][0]) < 1e-6 * ra[1][0]
                                          for op, v in a.inner):  # one of its divisions is before its reduction
                    self._report_divided(a, ra, oa, b, rb, ob, loc)
                else:
                    self._report_mix(a, ra, b, rb, loc)
                return True
        return False

    def _report_divided(self, a: _Term, ra: tuple, oa: int, b: _Term, rb: tuple, ob: int, loc: str) -> None:
        """Two terms reduced the same way over the same batch, one divided by the batch size more times than the
        other on its way to the loss (a division before its sum and another after it)."""
        n = ra[1][0]
        times = {1: "once", 2: "twice"}
        ka = -oa - (1 if ra[0] == "mean" else 0)  # divisions by N on the way (a mean is not one)
        kb = -ob - (1 if rb[0] == "mean" else 0)
        da, db = times.get(ka, f"{ka} times"), times.get(kb, f"{kb} times")
        ratio = (b.coef and abs(b.coef) / abs(a.coef)) or 0.0
        msg = (f"The loss backwarded at {loc} divides {self._describe(a, ra)} by the batch size {n} {da} on its "
               f"way to the loss (before or after its {ra[0]}) and {self._describe(b, rb)}, over the same batch, "
               f"{db}: every sample weighs {ratio:.3g} times less in the first term than in the second, a factor of "
               "the batch size that no objective asks for. On the parameters they share, the first term's gradient "
               f"is {ratio:.3g}-fold too small against the second's, which drives training alone (an auxiliary task "
               "that shapes nothing), and the balance changes with the batch size, while every loss falls.")
        fix = ("divide each term by the batch size once: drop the division applied to the per-sample values before "
               "the reduction (or the one after it); put any intended weight in an explicit coefficient.")
        call = self._loss_call(a.node)
        where = f"F.{call[0]} call at {call[1]}" if call is not None and call[1] else loc
        self.s.report("loss-terms-misscaled", msg, where=where, fix=fix, key=loc)

    # -- a mean over the batch divided by the batch size again ---------------------------------
    def _averaged_twice(self, reds: list[tuple[_Term, Any]], loc: str) -> bool:
        """A term that is a mean over ``N >= MIN_BATCH`` rows and is divided by ``N`` again on its way to the root
        (its per-sample weight ``1 / N**2``), next to a term over the same batch (``k * N`` rows, ``k <=
        MAX_CONCAT``: users, positives and negatives concatenated) that is not: no objective weighs one term by
        the batch size against another, so the division was meant for the other term (PyG's BPR loss,
        ``(-log_prob + reg) / n_pairs`` with ``log_prob`` already a mean).  No ratio of coefficients excuses it:
        the weight ``1 / N`` is the reduction's, not the user's."""
        for a, ra in reds:
            if ra is None or ra[0] != "mean" or not ra[1] or ra[1][0] < MIN_BATCH or ra[1][0] in ra[1][1:]:
                continue
            n = ra[1][0]
            oa, _ = batch_order(a, ra)
            if oa > -2:
                continue
            for b, rb in reds:
                if b is a or rb is None or not rb[1] or rb[1][0] % n or rb[1][0] // n > MAX_CONCAT:
                    continue
                if a.unknown != b.unknown or batch_order(b, rb, n)[0] <= oa or _on_leaf(b.node):
                    continue
                held = {id(p) for oi in self.s.optimizers.values() for p in oi.params}
                out_a, leaves_a = self._reach(a.node)
                _, leaves_b = self._reach(b.node)
                if not (out_a and leaves_a & leaves_b & held):
                    continue
                self._report_twice(a, ra, b, rb, n, loc)
                return True
        return False

    def _report_twice(self, a: _Term, ra: tuple, b: _Term, rb: tuple, n: int, loc: str) -> None:
        msg = (f"The loss backwarded at {loc} divides {self._describe(a, ra)} by the batch size {n} again: that "
               f"term is averaged over the batch twice, so each sample weighs 1/{n}² in it, while "
               f"{self._describe(b, rb)}, over the same batch, is not. The averaged-twice term is {n} times "
               "lighter against the other than the objective means (a ranking loss against its regulariser), and "
               "the balance between them changes with the batch size, while every loss falls.")
        fix = ("divide by the batch size only the terms that are not already averaged over it (loss = "
               "per_sample.mean() + reg_sum / n, not (per_sample.mean() + reg_sum) / n), or sum that term over the "
               "batch before the shared division; put any intended weight in an explicit coefficient.")
        call = self._loss_call(a.node)
        where = f"F.{call[0]} call at {call[1]}" if call is not None and call[1] else loc
        self.s.report("loss-terms-misscaled", msg, where=where, fix=fix, key=loc)

    def _reach(self, node: Any) -> tuple[bool, set[int]]:
        """Whether ``node``'s graph reaches a watched model's output of this step, and the leaves it reaches."""
        seen = {node}
        todo = [node]
        out = False
        leaves: set[int] = set()
        while todo and len(seen) < MAX_NODES:
            fn = todo.pop()
            if id(fn) in self.outputs and self.outputs[id(fn)] is fn:
                out = True
            var = getattr(fn, "variable", None)
            if var is not None:
                leaves.add(id(var))
            for nxt, _ in fn.next_functions:
                if nxt is not None and nxt not in seen:
                    seen.add(nxt)
                    todo.append(nxt)
        return out, leaves

    def _describe(self, t: _Term, r: tuple[str, tuple[int, ...]]) -> str:
        known = self._loss_call(t.node)
        shape = "x".join(str(n) for n in r[1])
        if known is not None:
            name, where = known
            red = "reduction='mean'" if r[0] == "mean" else "reduction='sum'"
            return f"F.{name}{f' at {where}' if where else ''} ({red} over a {shape} tensor)"
        return f"{'a mean' if r[0] == 'mean' else 'a sum'} over a {shape} tensor"

    def _loss_call(self, node: Any) -> tuple[str, str] | None:
        """The F loss call (name, line) whose input feeds ``node`` within three nodes (a loss's own
        log_softmax, abs or difference in between), if one was seen this step."""
        level = [node]
        for _ in range(3):
            level = [nxt for fn in level for nxt, _ in fn.next_functions[:2] if nxt is not None]
            for nxt in level:
                rec = self.losses.get(id(nxt))
                if rec is not None and rec[0] is nxt:
                    return rec[1], rec[2]
        return None

    def _report_mix(self, a: _Term, ra: tuple, b: _Term, rb: tuple, loc: str) -> None:
        n = ra[1][0]
        per_a = abs(a.coef) / (n if ra[0] == "mean" else 1)  # what one sample's own value weighs in the loss
        per_b = abs(b.coef) / (n if rb[0] == "mean" else 1)
        msg = (f"The loss backwarded at {loc} adds two terms reduced differently over the batch: "
               f"{self._describe(a, ra)} and {self._describe(b, rb)}. With {n} rows each, every sample weighs "
               f"{per_b / per_a:.3g} times more in the second than in the first: one is divided by the batch size "
               f"once more than the other, and their coefficients ({abs(a.coef):.3g} and {abs(b.coef):.3g}) do not "
               "make up for it. On the parameters they share, the first term's gradient shrinks with the batch "
               "size and the second drives training (a VAE whose reconstruction is averaged while its KL is summed "
               "decodes every input to the same blur), while the loss still falls.")
        fix = ("reduce both terms the same way over the batch: sum both and divide the total by the batch size "
               "(F.mse_loss(recon, x, reduction='sum') next to a summed KL), or average both (kl.sum(1).mean()); "
               "put any intended weight in an explicit coefficient.")
        call = self._loss_call(a.node) or self._loss_call(b.node)
        where = f"F.{call[0]} call at {call[1]}" if call is not None and call[1] else loc
        self.s.report("loss-terms-misscaled", msg, where=where, fix=fix, key=loc)

    # -- a soft distillation term without T² --------------------------------------------------
    def _soft_without_t2(self, terms: list[_Term], loc: str) -> bool:
        for s in terms:
            found = _softened(s.node)
            if found is None:
                continue
            logits, temp, lsm = found
            for h in terms:
                if h is s or h.unknown != s.unknown or h.coef == 0 or not _hard_on(h.node, logits):
                    continue
                r = reduction(s.node)
                rows = r[1][0] if r is not None and r[1] else None
                scale = 1.0
                for op, value in s.factors:
                    if op == "div" and rows is not None and value == rows:
                        continue  # batchmean: the batch-size division is not a weight
                    scale *= value if op == "mul" else 1.0 / value
                if abs(scale) > 1.0 or scale == 0:
                    return False
                self._report_t2(s, h, temp, abs(scale), lsm, loc)
                return True
        return False

    def _report_t2(self, s: _Term, h: _Term, temp: float, scale: float, lsm: Any, loc: str) -> None:
        rec = self.losses.get(id(lsm))
        call = f"F.{rec[1]} at {rec[2]}" if rec is not None and rec[0] is lsm and rec[2] else "the soft term"
        msg = (f"The loss backwarded at {loc} distils at temperature T = {temp:.3g}: {call} compares "
               f"log_softmax(logits / {temp:.3g}) with soft targets, next to a hard-label cross-entropy on the same "
               f"logits, but the soft term enters the sum with weight {scale:.3g}, with no factor of T² = "
               f"{temp * temp:.3g}. Its gradients shrink as 1/T², so the teacher's signal is {temp * temp:.3g} times "
               "weaker against the hard labels than the objective means and the student learns mostly from the "
               "labels, while every loss falls.")
        fix = ("multiply the soft term by T * T (Hinton et al. 2015): loss = alpha * soft * T * T + (1 - alpha) * "
               "hard.")
        where = f"F.{rec[1]} call at {rec[2]}" if rec is not None and rec[0] is lsm and rec[2] else loc
        self.s.report("loss-terms-misscaled", msg, where=where, fix=fix, key=loc)


def _on_leaf(node: Any) -> bool:
    """Whether the tensor that ``node`` reduces is a parameter itself (or a view of one): a weight penalty,
    not a term over the batch."""
    nxt = node.next_functions
    if type(node).__name__ == "PowBackward0" and nxt and nxt[0][0] is not None:
        nxt = nxt[0][0].next_functions  # the squared norm's norm
    child = _past_shape(nxt[0][0]) if nxt and nxt[0][0] is not None else None
    return child is None or type(child).__name__ == "AccumulateGrad"


def _past_shape(fn: Any) -> Any:
    for _ in range(4):
        if fn is None or type(fn).__name__ not in _SHAPE:
            return fn
        fn = fn.next_functions[0][0] if fn.next_functions else None
    return fn


def _divisor(fn: Any) -> tuple[Any, float] | None:
    """(the node divided, T) when ``fn`` divides by a constant T >= MIN_T (or multiplies by 1/T)."""
    kind = type(fn).__name__
    nxt = fn.next_functions
    if kind == "DivBackward0" and len(nxt) == 2 and nxt[0][0] is not None and nxt[1][0] is None:
        value, _ = _constant(getattr(fn, "_saved_other", None))
        if value is not None and value >= MIN_T:
            return nxt[0][0], value
    if kind == "MulBackward0" and len(nxt) == 2 and (nxt[0][0] is None) != (nxt[1][0] is None):
        a = nxt[0][0]
        value, _ = _constant(getattr(fn, "_saved_other" if a is not None else "_saved_self", None))
        if value is not None and 0 < value <= 1.0 / MIN_T:
            return (a if a is not None else nxt[1][0]), 1.0 / value
    return None


def _softened(node: Any) -> tuple[Any, float, Any] | None:
    """(the logits' node, T, the log_softmax node) when ``node``'s graph takes log_softmax (or log of softmax)
    of logits divided by a constant T >= MIN_T within :data:`MAX_SOFT` nodes."""
    seen = {node}
    todo = [node]
    while todo and len(seen) < MAX_SOFT:
        fn = todo.pop()
        kind = type(fn).__name__
        inner = None
        if kind == "LogSoftmaxBackward0":
            inner = fn.next_functions[0][0]
        elif kind == "LogBackward0":
            sm = fn.next_functions[0][0]
            if sm is not None and type(sm).__name__ == "SoftmaxBackward0":
                inner = sm.next_functions[0][0]
        if inner is not None:
            got = _divisor(inner)
            if got is not None:
                return got[0], got[1], fn
            continue  # a log_softmax of undivided logits: not a softened term; do not walk into the model
        for nxt, _ in fn.next_functions:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return None


def _hard_on(node: Any, logits: Any) -> bool:
    """Whether ``node`` is a class-index cross-entropy (nll_loss of log_softmax) of ``logits`` undivided."""
    if type(node).__name__ not in ("NllLossBackward0", "NllLoss2DBackward0"):
        return False
    lsm = _past_shape(node.next_functions[0][0])
    if lsm is None or type(lsm).__name__ != "LogSoftmaxBackward0":
        return False
    return _past_shape(lsm.next_functions[0][0]) is _past_shape(logits)


def _wrapper(active: list, safely: Callable, orig: Any) -> Any:
    @functools.wraps(orig)
    def backward(tensors: Any, *args: Any, **kwargs: Any) -> Any:
        noted = []
        for s in active:
            check = getattr(s, "termscale", None)
            if s.armed and check is not None:
                dead = getattr(s, "deadterm", None)  # backwards each term alone: before any hook is put on the graph
                if dead is not None:
                    safely(dead.on_backward, tensors)
                zero = getattr(s, "pgzero", None)  # a policy-gradient product whose weights are all zero
                if zero is not None:
                    safely(zero.on_backward, tensors)
                pick = getattr(s, "maskpick", None)  # reads the step's model outputs before termscale forgets them
                if pick is not None and not pick.retired:
                    safely(pick.on_backward, tensors, check.outputs)
                ww = getattr(s, "whereweight", None)  # class weights written as a where on the target
                if ww is not None:
                    safely(ww.on_backward, tensors)
                probs = getattr(s, "probtargets", None)  # a hand-written soft cross-entropy's target
                if probs is not None:
                    safely(probs.on_backward, tensors, check.outputs)
                sat = getattr(s, "satloss", None)  # a loss linear in a sigmoid of the model's scores
                if sat is not None:
                    safely(sat.on_backward, tensors, check.outputs)
                red = getattr(s, "reducedmask", None)  # a per-sample mask multiplied into a batch reduction
                if red is not None:
                    safely(red.on_backward, tensors, check.outputs)
                safely(check.on_backward, tensors)
                floor = getattr(s, "scalefloor", None)  # reads the graph's noise products (log-scale-non-negative)
                if floor is not None and floor.open:
                    safely(floor.on_backward, tensors)
                inv = getattr(s, "gradinv", None)  # hooks the nodes of user-written autograd.Functions
                if inv is not None:
                    safely(inv.on_backward, tensors)
            wasted = getattr(s, "wastedgrad", None)  # where this backward was called (backward-discarded)
            if s.armed and wasted is not None and not s.engine_loop:
                noted.append(wasted)
                safely(wasted.on_backward)
        if not noted:
            return orig(tensors, *args, **kwargs)
        try:
            return orig(tensors, *args, **kwargs)
        finally:
            for wasted in noted:
                wasted.after_backward()

    backward.__overt_original__ = orig  # type: ignore[attr-defined]
    return backward


def install(patch: Callable, active: list, safely: Callable) -> None:
    """Wrap ``torch.autograd.backward`` (what ``Tensor.backward`` calls) with ``patch(owner, name, make)``; the
    wrapper stays in place only while a checked step lasts (:func:`arm`).  ``safely(fn, *args)`` runs a check
    under the never-break policy."""
    global _ORIG, _WRAP
    patch(torch.autograd, "backward", functools.partial(_wrapper, active, safely))
    _WRAP = torch.autograd.backward
    _ORIG = getattr(_WRAP, "__overt_original__", None)
    arm(False)


def arm(on: bool) -> None:
    """Put the wrapper in place (a checked step) or the original back (between checked steps: no cost)."""
    if _ORIG is None or _WRAP is None:
        return
    current = torch.autograd.backward
    if on and current is _ORIG:
        torch.autograd.backward = _WRAP
    elif not on and current is _WRAP:
        torch.autograd.backward = _ORIG


def uninstalled() -> None:
    """The original is back (the last session ended): forget the pair."""
    global _ORIG, _WRAP
    _ORIG = _WRAP = None
