"""Guard on a Gaussian sample whose log-scale cannot be negative (slug ``log-scale-non-negative``, issue 33, the
wild corpus's w403).

The premise: the log-variance (or log standard deviation) that a reparameterised Gaussian sample exponentiates is a
free real number -- that is why it is parameterised in the log.  Passed through a function whose output is never
negative (``softplus``, ``relu``, ``exp``, ``sigmoid``, ``abs``, a square, ``clamp(min=0)``) before the
exponential, it can only be non-negative, so the standard deviation ``exp(0.5 * logvar)`` never falls below 1: every
draw is at least as wide as a unit prior, a VAE's latent code is drowned in unit noise, the KL term cannot reach
the posterior the data ask for, and nothing fails (wohlert/semi-supervised-pytorch#16: "it leads to log_var being
positive only").  A positive function applied to the *scale itself* (``std = softplus(s)``) is correct and is not
this.

What is proven, on at most :data:`MAX_WINDOWS` checked steps (from the step's first checked forward to its
optimizer step; no work on any other step): while the window lasts, ``torch.randn``, ``torch.randn_like``,
``torch.normal`` and ``Tensor.normal_`` (what ``torch.distributions``' ``rsample`` draws with) are wrapped and the
storage of each draw is noted (at most :data:`MAX_DRAWS` draws and :data:`MAX_BYTES` kept alive until the step;
none while ``torch.compile`` traces).  When the step's loss is backwarded (:mod:`overt.guards.termscale`'s wrapper of
``torch.autograd.backward`` hands over the root), its autograd graph is walked (at most :data:`MAX_NODES` nodes)
for a product of such a draw with a tensor that carries a gradient -- the ``scale * eps`` of a reparameterised
sample -- and the scale's chain is read down: positive powers, square roots and multiplications or divisions by a
positive constant (read from the node's saved scalar, a CPU number: no device read), then ``exp``, then the
log-scale's own positive constant factors and shifts, down to the function that made it.  Reported when that
function is one of the non-negative ones above and the log-scale's lower bound, computed through the chain, is at
least 0 (so the standard deviation's is at least 1).  Silent when any link is unknown (a shift whose constant
autograd does not keep, a constant on the device, an operation outside the list), when the scale is made
positive without an exponential (``softplus`` of the scale), when the log-scale's floor is below 0 (a chosen
minimum spread such as ``exp(softplus(s) - 5)``), and when the noise does not come from one of the draws above.

A second premise on the same graph (slug ``sample-spread-unpriced``, the corpus's w350): a program that learns the
spread of the Gaussian it samples from prices it in the loss -- a KL divergence to a prior, a log-density of the
draw, an entropy.  Without such a term the log-scale's only gradient is the harm the noise does to the other terms,
so the spread is driven to zero and the codes drift from the prior (facebookresearch/irmae#1: a VAE's loss without
its KL term).  The graph is walked whole (a larger one is not judged), counting the nodes that read each edge (a
node and its output index, so a ``chunk``'s halves are told apart); from the noise product's scale input down
through elementwise links of one input (:data:`_SPREAD`: constant factors and shifts, ``exp``, roots, views) to the
tensor they start from (a layer's output or a chunk of it, not a leaf parameter), the chain must pass through an
``exp`` and every edge on it be read by that one node only.  Reported at the optimizer step when the window saw
exactly one backward (a KL backwarded on its own is another graph); silent when anything else reads the log-scale,
the standard deviation or a link between.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import torch

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.session import GuardSession
    from overt.guards.watched import ModelInfo, OptInfo

SLUG = "log-scale-non-negative"
UNPRICED = "sample-spread-unpriced"
MAX_WINDOWS = 3  # checked steps watched
MAX_NODES = 4000  # autograd nodes walked per backward
MAX_DRAWS = 64  # noise draws noted per window
MAX_BYTES = 256 << 20  # bytes of draws a window keeps alive (until its optimizer step)
MAX_CHAIN = 24  # links read down a scale's chain

# the functions whose output is never negative, by their autograd node (the producer of the log-scale)
_NON_NEGATIVE = {"SoftplusBackward0": "softplus", "ReluBackward0": "relu", "ExpBackward0": "exp",
                 "SigmoidBackward0": "sigmoid", "AbsBackward0": "abs", "Relu6Backward0": "relu6",
                 "HardsigmoidBackward0": "hardsigmoid"}
# nodes that only move, copy or pick values: a bound passes through them unchanged
_SHAPE = frozenset({"ViewBackward0", "ReshapeAliasBackward0", "UnsafeViewBackward0", "ExpandBackward0",
                    "CloneBackward0", "UnsqueezeBackward0", "SqueezeBackward0", "SqueezeBackward1",
                    "SqueezeBackward2", "SqueezeBackward3", "SliceBackward0", "SplitBackward0",
                    "SplitWithSizesBackward0", "SelectBackward0", "UnbindBackward0", "ToCopyBackward0",
                    "PermuteBackward0", "TransposeBackward0", "TBackward0", "AliasBackward0",
                    "ContiguousBackward0", "NarrowBackward0"})
# the draws of standard normal noise, wrapped while a window lasts: (owner, attribute)
_DRAWS = ((torch, "randn"), (torch, "randn_like"), (torch, "normal"), (torch.Tensor, "normal_"))


def _number(v: Any) -> float | None:
    """A saved constant as a float: a Python number, or a one-element tensor on the CPU (read without a device
    synchronisation); None otherwise."""
    if isinstance(v, bool):
        return None
    if isinstance(v, (int, float)):
        return float(v)
    if isinstance(v, torch.Tensor) and v.numel() == 1 and v.device.type == "cpu" and not v.requires_grad:
        return float(v.item())
    return None


def _saved(fn: Any, attr: str) -> Any:
    try:
        return getattr(fn, attr)
    except Exception:  # freed, or not saved by this node
        return None


def _graph_child(fn: Any) -> tuple[Any, float | None, str] | None:
    """For a node of two inputs of which exactly one carries a gradient: (that input's node, the other input as a
    constant when autograd saved it, the node's kind); None otherwise."""
    nxt = fn.next_functions
    if len(nxt) != 2:
        return None
    a, b = nxt[0][0], nxt[1][0]
    if (a is None) == (b is None):
        return None
    name = type(fn).__name__
    if a is not None:
        return a, _number(_saved(fn, "_saved_other")), name + ":self"
    return b, _number(_saved(fn, "_saved_self")), name + ":other"


def _step(fn: Any) -> tuple[Any, Any] | None:
    """One link of a chain of monotone increasing maps: (the node below, a function mapping a lower bound of the
    node below's values to one of this node's), or None when the link is not such a map (or its constant is not
    known)."""
    name = type(fn).__name__
    if name in _SHAPE:
        nxt = [n for n, _ in fn.next_functions if n is not None]
        return (nxt[0], lambda lb: lb) if len(nxt) == 1 else None
    if name == "ExpBackward0":
        return fn.next_functions[0][0], math.exp
    if name == "SqrtBackward0":
        return fn.next_functions[0][0], lambda lb: math.sqrt(max(lb, 0.0))
    if name == "PowBackward0":
        p = _number(_saved(fn, "_saved_exponent"))
        if p is None or p <= 0:
            return None
        return fn.next_functions[0][0], lambda lb, p=p: max(lb, 0.0) ** p if lb >= 0 else None
    if name in ("MulBackward0", "MulBackward1", "DivBackward0", "DivBackward1"):
        if name.endswith("1"):  # a Python scalar: one input
            c = _number(_saved(fn, "_saved_other"))
            child = fn.next_functions[0][0]
            side = "self"
        else:
            got = _graph_child(fn)
            if got is None:
                return None
            child, c, side = got[0], got[1], got[2].split(":")[1]
        if c is None or c <= 0 or not math.isfinite(c) or child is None:
            return None
        if name.startswith("Div"):
            if side != "self":  # constant / x: decreasing
                return None
            return child, lambda lb, c=c: lb / c
        return child, lambda lb, c=c: lb * c
    return None  # (a shift by a constant: autograd does not keep the constant, so its sign is unknown)


def scale_floor(fn: Any) -> tuple[float, str] | None:
    """The lower bound of the values of the node ``fn`` (the scale multiplying the noise) and the name of the
    non-negative function it comes from, when ``fn`` is ``g(exp(h(f(...))))`` with ``g`` and ``h`` increasing
    maps of the kinds :func:`_step` reads and ``f`` never negative; None otherwise (or when the log-scale's bound,
    ``h(0)``, is below 0)."""
    above: list[Any] = []  # the maps between the scale and its exp, outermost first
    node = fn
    for _ in range(MAX_CHAIN):
        if node is None:
            return None
        if type(node).__name__ == "ExpBackward0":
            break
        link = _step(node)
        if link is None:
            return None
        above.append(link[1])
        node = link[0]
    else:
        return None
    below: list[Any] = []  # the maps between the exp and the non-negative function, outermost first
    node = node.next_functions[0][0]
    for _ in range(MAX_CHAIN):
        if node is None:
            return None
        name = type(node).__name__
        producer = _NON_NEGATIVE.get(name)
        floor = 0.0
        if producer is None and name == "PowBackward0":
            p = _number(_saved(node, "_saved_exponent"))
            if p is not None and p > 0 and p == int(p) and int(p) % 2 == 0:
                producer = "an even power"
        if producer is None and name in ("ClampMinBackward0", "ClampBackward1"):
            m = _number(_saved(node, "_saved_min"))
            if m is not None and m >= 0:
                producer, floor = f"clamp(min={m:g})", m
        if producer is not None:
            lb = floor
            for f in reversed(below):
                lb = f(lb)
                if lb is None:
                    return None
            if lb < 0:  # a floor chosen below 1 (exp(softplus(s) - 5)): a minimum spread, not this
                return None
            lb = math.exp(lb)
            for f in reversed(above):
                lb = f(lb)
                if lb is None:
                    return None
            return lb, producer
        link = _step(node)
        if link is None or name == "ExpBackward0":
            return None
        below.append(link[1])
        node = link[0]
    return None


# nodes of one input that compute a log-scale's spread from it elementwise (a constant factor or shift, exp, a root)
_SPREAD = frozenset({"ExpBackward0", "SqrtBackward0", "PowBackward0", "MulBackward0", "MulBackward1", "DivBackward0",
                     "DivBackward1", "AddBackward0", "AddBackward1", "SubBackward0", "SubBackward1", "NegBackward0",
                     "RsubBackward1", "ClampMinBackward0", "ClampBackward1"}) | _SHAPE
# views whose one node serves several outputs (chunk, unbind): the log-scale is one of them, the walk ends there
_MULTI = frozenset({"SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0"})


def spread_edges(mul: Any, child_nr: int) -> list[tuple[int, int]] | None:
    """The edges ``(id(node), output_nr)`` from the noise product ``mul``'s scale input down to the tensor the
    scale is computed from elementwise (the log-scale: the first node outside :data:`_SPREAD`, or a chunk of a
    layer's output), when the chain passes through an ``exp`` and that tensor is computed by the program (not a
    leaf parameter); None otherwise."""
    node, nr = mul.next_functions[child_nr]
    edges: list[tuple[int, int]] = []
    seen_exp = False
    for _ in range(MAX_CHAIN):
        if node is None:
            return None
        edges.append((id(node), nr))
        name = type(node).__name__
        if name == "AccumulateGrad":
            return None
        if name in _MULTI or name not in _SPREAD:
            return edges if seen_exp else None
        live = [(n, k) for n, k in node.next_functions if n is not None]
        if len(live) != 1:
            return edges if seen_exp else None
        seen_exp = seen_exp or name == "ExpBackward0"
        node, nr = live[0]
    return None


class ScaleFloorChecks(Check):
    name = "scalefloor"

    def __init__(self, session: GuardSession):
        super().__init__(session)
        self.windows = 0
        self.open = False
        self.swapped: list[tuple[Any, str, Any, bool]] = []  # (owner, attribute, original, owned by the owner)
        self.draws: dict[int, tuple[torch.Tensor, str | None]] = {}  # storage pointer -> (draw, its user line)
        self.held = 0  # bytes of the draws kept
        self.done = False
        self.unpriced_done = False
        self.backwards = 0  # backwards of the open window
        self.unpriced: str | None = None  # the line of a draw whose spread no other term of the loss reads

    # -- the window: a checked step, from its first forward to its optimizer step -------------------------
    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.open or (self.done and self.unpriced_done) or self.windows >= MAX_WINDOWS or not self.s.armed:
            return
        self.windows += 1
        self.open = True
        for owner, attr in _DRAWS:
            orig = getattr(owner, attr, None)
            if orig is None:
                continue
            self.swapped.append((owner, attr, orig, attr in vars(owner)))
            setattr(owner, attr, self._wrap(orig))

    def _wrap(self, orig: Any) -> Any:
        check = self

        def draw(*args: Any, **kwargs: Any) -> Any:
            out = orig(*args, **kwargs)
            if torch.compiler.is_compiling() or not isinstance(out, torch.Tensor):
                return out  # (traced by torch.compile: no storage to note)
            size = out.numel() * out.element_size()
            if out.is_floating_point() and not out.requires_grad and len(check.draws) < MAX_DRAWS \
                    and check.held + size <= MAX_BYTES:
                check.draws[out.data_ptr()] = (out, user_location(2))
                check.held += size
            return out

        draw.__wrapped__ = orig  # type: ignore[attr-defined]
        return draw

    def _close(self) -> None:
        for owner, attr, orig, owned in reversed(self.swapped):
            if owned:
                setattr(owner, attr, orig)
            else:
                try:
                    delattr(owner, attr)
                except AttributeError:
                    setattr(owner, attr, orig)
        self.swapped = []
        self.draws = {}
        self.held = 0
        self.open = False
        self.backwards = 0
        self.unpriced = None

    def after_checked_step(self, oi: OptInfo) -> None:
        if not self.open:
            return
        line, one = self.unpriced, self.backwards == 1
        self._close()
        if line is not None and one:  # one backward: the whole loss was seen (no KL backwarded on its own)
            self._report_unpriced(line)

    def end_of_run(self) -> None:
        if self.open:
            self._close()

    def on_crash(self, error: BaseException) -> None:
        if self.open:
            self._close()

    def remove_hooks(self) -> None:
        if self.open:
            self._close()

    # -- the backward of a checked step: the loss's graph ----------------------------------------------------
    def on_backward(self, tensors: Any) -> None:
        if not self.open or not self.draws:
            return
        self.backwards += 1
        roots = list(tensors) if isinstance(tensors, (list, tuple)) else [tensors]
        todo = [t.grad_fn for t in roots if isinstance(t, torch.Tensor) and t.grad_fn is not None]
        seen: set[int] = set()
        readers: dict[tuple[int, int], int] = {}  # edge (id(node), output_nr) -> how many nodes read it
        first: dict[int, Any] = {}  # id(node) -> the first node seen reading its output 0 (a product's sum)
        products: list[tuple[Any, int, str | None]] = []  # noise products: (node, scale input, the draw's line)
        while todo:
            if len(seen) >= MAX_NODES:
                products = []  # a graph not walked whole: no edge's readers are known
                break
            fn = todo.pop()
            if id(fn) in seen:
                continue
            seen.add(id(fn))
            if type(fn).__name__ == "MulBackward0" and len(products) < MAX_DRAWS:
                hit = self._noise_product(fn)
                if hit is not None:
                    products.append(hit)
            for n, k in fn.next_functions:
                if n is not None:
                    readers[(id(n), k)] = readers.get((id(n), k), 0) + 1
                    if k == 0:
                        first.setdefault(id(n), fn)
                    if id(n) not in seen:
                        todo.append(n)
        for fn, nr, line in products:
            if not self.done:
                found = scale_floor(fn.next_functions[nr][0])
                if found is not None and found[0] >= 1.0 - 1e-6:
                    self._report(found[0], found[1], line)
            if not self.unpriced_done and self.unpriced is None:
                edges = spread_edges(fn, nr)
                if edges is not None and all(readers.get(e, 0) == 1 for e in edges) \
                        and self._read_once(fn, readers, first):
                    self.unpriced = line or "the Gaussian sample"

    @staticmethod
    def _read_once(fn: Any, readers: dict[tuple[int, int], int], first: dict[int, Any]) -> bool:
        """Whether the draw ``fn`` makes (the product, or the sum ``loc + scale * eps`` that reads it) is read by
        one node only: a second reader (an adversarial autoencoder's discriminator on the codes) may price the
        spread through the draw itself."""
        if readers.get((id(fn), 0), 0) != 1:
            return False
        parent = first.get(id(fn))
        if parent is not None and type(parent).__name__ in ("AddBackward0", "SubBackward0"):
            return readers.get((id(parent), 0), 0) == 1
        return True

    def _noise_product(self, fn: Any) -> tuple[Any, int, str | None] | None:
        """(``fn``, the index of its input that carries a gradient, the draw's line) when ``fn`` multiplies a draw
        noted in this window by a tensor that carries a gradient."""
        nxt = fn.next_functions
        if len(nxt) != 2 or (nxt[0][0] is None) == (nxt[1][0] is None):
            return None
        nr = 0 if nxt[0][0] is not None else 1
        noise = _saved(fn, "_saved_other" if nr == 0 else "_saved_self")
        if not isinstance(noise, torch.Tensor) or noise.requires_grad:
            return None
        drawn = self.draws.get(noise.data_ptr())
        if drawn is None or drawn[0].shape != noise.shape:
            return None
        return fn, nr, drawn[1]

    def _report(self, floor: float, producer: str, line: str | None) -> None:
        self.done = True
        where = line or "the Gaussian sample"
        msg = (f"the Gaussian noise drawn{f' at {line}' if line else ''} is multiplied by a standard deviation "
               f"computed as exp of a log-scale that comes out of {producer}, a function that is never negative: "
               f"the log-variance (or log standard deviation) can never go below 0, so the standard deviation of "
               f"every draw is at least {floor:.3g}. A log-scale is parameterised in the log to range over all reals; "
               "kept non-negative, the posterior can never be narrower than a unit prior, the latent code is drowned "
               "in that noise and the KL term cannot reach the posterior the data ask for -- training runs, "
               "reconstructs worse and pays a larger KL, with no error.")
        fix = (f"take the log-variance straight from the layer (log_var = linear(h), no {producer}); or, to keep a "
               "positive function, apply it to the standard deviation itself (std = softplus(linear(h)) + 1e-4) and "
               "sample mu + std * eps")
        self.s.report(SLUG, msg, where=where, fix=fix, key=f"scale:{where}")

    def _report_unpriced(self, line: str) -> None:
        self.unpriced_done = True
        msg = (f"the Gaussian noise drawn at {line} is multiplied by a standard deviation computed as exp of a "
               "log-scale that the rest of the loss never reads: no term of the loss backwarded on this step prices "
               "the sample's spread (a KL divergence to the prior, a log-density, an entropy), so its only gradient "
               "is the harm the noise does to the other terms, which drives the spread toward zero. The sample "
               "becomes deterministic and nothing keeps the codes near the prior: a VAE trained so is an "
               "autoencoder with noise, whose samples from the prior decode to nothing -- with no error.")
        fix = ("add the term that prices the distribution to the loss, e.g. for a VAE loss = reconstruction + beta * "
               "KL with KL = -0.5 * (1 + log_var - mu**2 - log_var.exp()).sum(-1).mean() (or "
               "torch.distributions.kl_divergence(q, prior)); for a policy, the entropy or log_prob term")
        self.s.report(UNPRICED, msg, where=line, fix=fix, key=f"unpriced:{line}")


__all__ = ["ScaleFloorChecks", "scale_floor", "spread_edges"]
