"""An input and its target augmented by one random transform with separate random draws (OVT323
``labels-unrelated-to-inputs``, issue 33 family 4: labels that still belong to their inputs).

A data set's ``__getitem__`` that returns an input and a dense target (an image and its mask, a
signal and its per-step labels) must move both with the same random parameters: a shift, crop,
flip or rotation drawn once for the image and again for the mask puts the target on other pixels
than the ones it labels (Augmentor#188).  Reported where one function is called on the input and on
the target, both results returned together, and the random values in the two calls' arguments
differ: a fresh draw written inside one call (``shift(mask, torch.randint(...))``), or two names bound
to two different draws.  Quiet when both calls take the same drawn value, when a call draws nothing
in its arguments (randomness inside a transform object cannot be seen), and outside ``__getitem__``.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule

_TORCH_RANDOM = frozenset({"torch.rand", "torch.randn", "torch.randint", "torch.randperm", "torch.rand_like",
                           "torch.randn_like", "torch.randint_like", "torch.normal", "torch.bernoulli",
                           "torch.multinomial"})


def _random_call(ix: FileIndex, node: ast.AST) -> bool:
    if not isinstance(node, ast.Call):
        return False
    q = ix.qualname(node.func) or ""
    return q in _TORCH_RANDOM or q.startswith(("random.", "numpy.random.", "np.random."))


def _draws(ix: FileIndex, args: list[ast.expr], bound: dict[str, int]) -> set[object]:
    """The random values an argument list uses: the id of each draw written inline, the line of the draw
    a name is bound to."""
    out: set[object] = set()
    for arg in args:
        for n in ast.walk(arg):
            if _random_call(ix, n):
                out.add(id(n))
            elif isinstance(n, ast.Name) and n.id in bound:
                out.add(bound[n.id])
    return out


def _returned(fn: ast.AST) -> set[str]:
    """Names returned together (``return image, mask``, a dict of them)."""
    out: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Return) and isinstance(n.value, (ast.Tuple, ast.List, ast.Dict)):
            elts = n.value.values if isinstance(n.value, ast.Dict) else n.value.elts
            names = {e.id for e in elts if isinstance(e, ast.Name)}
            if len(names) >= 2:
                out |= names
    return out


def _pairs(ix: FileIndex, fn: ast.FunctionDef) -> Iterator[tuple[ast.Call, ast.Call, str]]:
    bound: dict[str, int] = {}  # names assigned a value made of random draws -> the line of the draw
    calls: list[tuple[str, str, ast.Call]] = []  # (callee, the name it rebinds, the call)
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)):
            continue
        target = n.targets[0].id
        if any(_random_call(ix, m) for m in ast.walk(n.value)) and not (
                isinstance(n.value, ast.Call) and n.value.args and isinstance(n.value.args[0], ast.Name)
                and n.value.args[0].id == target):
            bound[target] = n.lineno
        elif isinstance(n.value, ast.Call) and n.value.args and isinstance(n.value.args[0], ast.Name) \
                and n.value.args[0].id == target:
            callee = dotted(n.value.func)
            if callee:
                calls.append((callee, target, n.value))
    returned = _returned(fn)
    for i, (callee, a, first) in enumerate(calls):
        for callee2, b, second in calls[i + 1:]:
            if callee2 != callee or a == b or not {a, b} <= returned:
                continue
            d1 = _draws(ix, first.args[1:] + [k.value for k in first.keywords], bound)
            d2 = _draws(ix, second.args[1:] + [k.value for k in second.keywords], bound)
            if d1 and d2 and d1 != d2:
                yield first, second, callee


@rule("labels-unrelated-to-inputs")
def augmentation_desynchronised(ix: FileIndex) -> Iterator[Hit]:
    for fn in ast.walk(ix.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "__getitem__"):
            continue
        for first, second, callee in _pairs(ix, fn):
            a, b = dotted(first.args[0]), dotted(second.args[0])
            yield Hit("labels-unrelated-to-inputs", second,
                      f"`{a}` (line {first.lineno}) and `{b}`, returned together, go through {callee}() with "
                      f"separate random draws: each gets its own shift, crop or flip, so the target no longer lies "
                      f"on the input it labels",
                      fix=f"draw the random parameters once and pass the same draw to both {callee}() calls (or use "
                          f"a transform that takes the input and the target together)")
