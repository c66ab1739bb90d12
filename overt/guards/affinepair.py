"""Guard on two ``Linear`` layers applied one after the other with nothing between them (slug
``linear-layers-collapse``, issue 33, the wild corpus's w371).

The premise every correct network satisfies: a layer that adds parameters adds capacity.  Two affine maps
composed are one affine map, ``B(A(x)) = (W_B W_A) x + (W_B b_A + b_B)``, of rank at most ``min(in_A, out_B)``
when the middle width is at least that; a single ``Linear(in_A, out_B)`` computes every such map.  Where a
network applies ``A`` and then ``B`` to ``A``'s output, unchanged, and nothing else reads that output, the
middle layer adds parameters and no capacity: the nonlinearity that was meant between them is missing
(nutonomy/nuscenes-devkit#728: an MTP head's two fully connected layers with no activation between them).

What is proven, from values the program computes, on one training forward per model (its first checked one;
no work on any other step): every module of the model whose forward is ``nn.Linear``'s is hooked for that forward.
A pair is judged when ``B``'s input *is* ``A``'s output tensor (the same object, its version counter unchanged:
no in-place activation such as ``ReLU(inplace=True)`` ran on it), both layers' weights are trainable, the middle
width is at least ``min(in_A, out_B)`` (a narrower middle is a low-rank factorisation, chosen on purpose: LoRA,
bottlenecks), both are children of one module (composed in one place: a layer that ends a sub-network, an encoder,
returns that sub-network's representation, which its author may mean for other uses), and, at the forward's end,
``A``'s output is read by exactly one node of the autograd graph reachable from the model's outputs (``B``'s), is
not itself an output, and no Python name holds it (its reference count is ours only): nothing else uses the middle
representation.  A dropout, a norm, an activation, a sum or a
reshape between the two makes a new tensor and is never judged.
"""

from __future__ import annotations

import sys
import weakref
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from overt.guards.check import Check
from overt.guards.where import user_location

if TYPE_CHECKING:
    from overt.guards.watched import ModelInfo

SLUG = "linear-layers-collapse"
MAX_MODULES = 512  # Linear layers hooked for the one forward looked at
MAX_MODELS = 4  # models looked at per run
MAX_NODES = 50_000  # autograd nodes walked to count the middle tensor's readers


def _plain_linear(m: nn.Module) -> bool:
    return isinstance(m, nn.Linear) and type(m).forward is nn.Linear.forward \
        and isinstance(getattr(m, "weight", None), nn.Parameter) and m.weight.dim() == 2


def _tensors(output: Any, out: list[torch.Tensor], depth: int = 0) -> None:
    if isinstance(output, torch.Tensor):
        out.append(output)
    elif depth < 3 and isinstance(output, (tuple, list)):
        for o in output[:32]:
            _tensors(o, out, depth + 1)
    elif depth < 3 and isinstance(output, dict):
        for o in list(output.values())[:32]:
            _tensors(o, out, depth + 1)


def _readers(roots: list[torch.Tensor], node: Any, nr: int) -> int | None:
    """How many edges of the autograd graph reachable from ``roots`` lead to output ``nr`` of ``node``
    (None when the walk is cut short)."""
    seen: set[int] = set()
    stack = [t.grad_fn for t in roots if t.grad_fn is not None]
    count = 0
    while stack:
        fn = stack.pop()
        if id(fn) in seen:
            continue
        seen.add(id(fn))
        if len(seen) > MAX_NODES:
            return None
        for nxt, i in fn.next_functions:
            if nxt is None:
                continue
            if nxt is node and i == nr:
                count += 1
            if id(nxt) not in seen:
                stack.append(nxt)
    return count


class AffinePairChecks(Check):
    name = "affinepair"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked: set[int] = set()  # id(model info)
        self.handles: list[Any] = []
        self.model: ModelInfo | None = None
        self.outputs: dict[int, tuple[Any, nn.Module, int]] = {}  # id(output) -> (weakref, layer, version)
        self.pairs: list[tuple[nn.Module, nn.Module, torch.Tensor, str | None]] = []

    def on_checked_forward(self, info: ModelInfo, args: tuple, light: bool) -> None:
        if self.handles or id(info) in self.looked or len(self.looked) >= MAX_MODELS:
            return
        self.looked.add(id(info))
        layers = [m for m in info.module.modules() if _plain_linear(m)]
        if len(layers) < 2:
            return
        self.model = info
        for m in layers[:MAX_MODULES]:
            self.handles.append(m.register_forward_pre_hook(self._before))
            self.handles.append(m.register_forward_hook(self._after))

    def _before(self, module: nn.Module, args: tuple) -> None:
        x = args[0] if args else None
        if not isinstance(x, torch.Tensor) or len(self.pairs) >= 64:
            return
        seen = self.outputs.get(id(x))
        if seen is None or seen[0]() is not x or seen[1] is module or seen[2] != x._version:
            return
        self.pairs.append((seen[1], module, x, user_location(2)))

    def _after(self, module: nn.Module, args: tuple, output: Any) -> None:
        if isinstance(output, torch.Tensor) and torch.is_grad_enabled() and len(self.outputs) < 4 * MAX_MODULES:
            self.outputs[id(output)] = (weakref.ref(output), module, output._version)

    def on_forward_end(self, info: ModelInfo, output: Any, failed: bool) -> None:
        if info is not self.model:
            return
        self._unhook()
        self.model = None
        pairs, self.pairs, self.outputs = self.pairs, [], {}
        if failed or not pairs:
            return
        roots: list[torch.Tensor] = []
        _tensors(output, roots)
        parent = {id(m): n.rpartition(".")[0] for n, m in info.module.named_modules()}
        # the references a tensor held by nobody else has here (the pairs entry, the loop's name, getrefcount's
        # argument), counted on a fresh tensor held the same way; autograd keeps one more on a tensor it saved
        for _, _, t, _ in [(None, None, torch.empty(0), None)]:
            ours = sys.getrefcount(t)
        for a, b, x, line in pairs:
            if parent.get(id(a)) != parent.get(id(b)):
                continue  # A ends one sub-network and B starts another: A's output is that sub-network's representation
            if sys.getrefcount(x) > ours + 1:
                continue  # a Python name (an attribute, a list) still holds the middle tensor: something reads it
            if self._collapses(a, b, x, roots):
                self._report(info, a, b, line)

    def _collapses(self, a: nn.Module, b: nn.Module, x: torch.Tensor, roots: list[torch.Tensor]) -> bool:
        if not (a.weight.requires_grad and b.weight.requires_grad):
            return False
        if a.out_features < min(a.in_features, b.out_features):
            return False  # a low-rank factorisation: a narrower middle on purpose
        if x.grad_fn is None or any(r is x for r in roots):
            return False
        readers = _readers(roots, x.grad_fn, x.output_nr)
        return readers == 1

    def _report(self, info: ModelInfo, a: nn.Module, b: nn.Module, line: str | None) -> None:
        names = {id(m): n for n, m in info.module.named_modules()}
        na = f"{info.name}.{names.get(id(a), '?')}"
        nb = f"{info.name}.{names.get(id(b), '?')}"
        i, h, o = a.in_features, a.out_features, b.out_features
        msg = (f"{nb} (Linear {h} -> {o}) is applied to the output of {na} (Linear {i} -> {h}) with nothing between "
               f"them: its input is {na}'s output tensor itself, unchanged, and "
               "nothing else reads it. Two affine maps composed are one affine map, of rank at most "
               f"{min(i, o)}, which a single Linear({i}, {o}) computes: the {h}-wide layer adds "
               f"{h * (i + o) + h + o - (i * o + o):,} parameters and no capacity, and whatever the network was "
               f"meant to compute nonlinearly from {na}'s input is out of its reach. A nonlinearity between them "
               "was most likely meant.")
        fix = ("put an activation between the two layers (F.relu on the first one's output, or an nn.ReLU() between "
               "them in a Sequential); if one affine map is meant, use a single Linear")
        self.s.report(SLUG, msg, where=line or nb, fix=fix, key=f"pair:{na}:{nb}")

    def _unhook(self) -> None:
        for h in self.handles:
            h.remove()
        self.handles = []

    def remove_hooks(self) -> None:
        self._unhook()


__all__ = ["AffinePairChecks"]
