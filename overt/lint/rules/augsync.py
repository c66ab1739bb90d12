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

from overt.lint.index import FileIndex, dotted, tokens
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


#: random transforms that move pixels: a dense target must go through the same draw
_GEOMETRIC = frozenset({"RandomHorizontalFlip", "RandomVerticalFlip", "RandomRotation", "RandomResizedCrop",
                        "RandomCrop", "RandomAffine", "RandomPerspective", "ElasticTransform", "RandAugment",
                        "AutoAugment", "TrivialAugmentWide", "AugMix", "RandomZoomOut", "RandomIoUCrop"})
#: calls that convert a value without moving its pixels
_CONVERSIONS = frozenset({"as_tensor", "from_numpy", "tensor", "array", "asarray", "open", "long", "float", "int",
                          "squeeze", "unsqueeze", "astype", "convert", "to", "copy", "clone", "len", "isinstance"})
#: words of a name that holds a dense target (one value per pixel or position), not a class label
_DENSE = frozenset({"mask", "masks", "seg", "segmentation", "gt", "annotation", "anno", "trimap", "depth",
                    "heatmap", "density", "alpha", "saliency", "semantic", "lbl"})


def _transform_values(ix: FileIndex, cls: ast.ClassDef, attr: str) -> list[ast.AST]:
    """What ``self.<attr>`` is bound to: the value written in the class, or -- when that is a parameter of
    ``__init__`` -- the arguments the file passes for it where it makes the data set (one hop through a
    module-level name)."""
    out: list[ast.AST] = []
    init = next((f for f in cls.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"), None)
    if init is None:
        return out
    params = [a.arg for a in init.args.args]
    bound = []
    for n in ast.walk(init):
        if isinstance(n, ast.Assign) and len(n.targets) == 1:
            t = n.targets[0]
            if dotted(t) == f"self.{attr}":
                bound.append(n.value)
            elif isinstance(t, ast.Tuple) and isinstance(n.value, ast.Tuple) and len(t.elts) == len(n.value.elts):
                bound += [v for e, v in zip(t.elts, n.value.elts) if dotted(e) == f"self.{attr}"]
    for v in bound:
        if not (isinstance(v, ast.Name) and v.id in params):
            out.append(v)
            continue
        pos = params.index(v.id) - 1  # self
        for call in ix.calls:
            if dotted(call.func) != cls.name:
                continue
            arg = next((k.value for k in call.keywords if k.arg == v.id), None)
            if arg is None and 0 <= pos < len(call.args):
                arg = call.args[pos]
            if arg is not None:
                out.append(arg)
        default = _default(init, v.id)
        if default is not None:
            out.append(default)
    resolved = []
    for v in out:
        if isinstance(v, ast.Name) and len(ix.assigns.get(v.id, [])) == 1:
            v = ix.assigns[v.id][0]
        resolved.append(v)
    return resolved


def _default(fn: ast.FunctionDef, name: str) -> ast.AST | None:
    args = fn.args.args
    defaults = fn.args.defaults
    for a, d in zip(args[len(args) - len(defaults):], defaults):
        if a.arg == name:
            return d
    return None


def _geometric(ix: FileIndex, value: ast.AST) -> list[str]:
    """The random geometric transforms in a transform value (a ``Compose([...])`` or one transform)."""
    out = []
    for n in ast.walk(value):
        if isinstance(n, ast.Call):
            last = (ix.qualname(n.func) or dotted(n.func) or "").rsplit(".", 1)[-1]
            if last in _GEOMETRIC:
                out.append(last)
    return out


def _image_only(ix: FileIndex, fn: ast.FunctionDef) -> Iterator[tuple[ast.Call, str, str, list[str]]]:
    """``(the call, the input's name, the dense target's name, the geometric transforms)`` for an input put
    through a transform with random geometric operations while a dense target returned with it never goes
    through a transform."""
    cls = ix.enclosing_class(fn)
    if cls is None:
        return
    returned = _returned(fn)
    dense = [n for n in returned if set(tokens(n)) & _DENSE]
    if not dense:
        return
    passed: set[str] = set()  # names given to a call that may transform them (not a plain conversion)
    for n in ast.walk(fn):
        if isinstance(n, ast.Call) and (dotted(n.func) or "").rsplit(".", 1)[-1] not in _CONVERSIONS:
            for a in list(n.args) + [k.value for k in n.keywords]:
                for m in ast.walk(a):
                    if isinstance(m, ast.Name):
                        passed.add(m.id)
    for n in ast.walk(fn):
        if not (isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                and isinstance(n.value, ast.Call) and n.value.args and isinstance(n.value.args[0], ast.Name)
                and n.value.args[0].id == n.targets[0].id and n.targets[0].id in returned):
            continue
        callee = dotted(n.value.func) or ""
        if not callee.startswith("self.") or callee.count(".") != 1:
            continue
        ops = sorted({op for v in _transform_values(ix, cls, callee[5:]) for op in _geometric(ix, v)})
        if not ops:
            continue
        for target in dense:
            if target != n.targets[0].id and target not in passed:
                yield n.value, n.targets[0].id, target, ops
                return


@rule("labels-unrelated-to-inputs")
def augmentation_desynchronised(ix: FileIndex) -> Iterator[Hit]:
    for fn in ast.walk(ix.tree):
        if not (isinstance(fn, ast.FunctionDef) and fn.name == "__getitem__"):
            continue
        for call, image, target, ops in _image_only(ix, fn):
            yield Hit("labels-unrelated-to-inputs", call,
                      f"`{image}` goes through {dotted(call.func)}, whose {', '.join(ops)} move pixels at random, but "
                      f"`{target}`, returned with it, goes through no transform: each sample's target stays where "
                      f"the input was before it was flipped, cropped or rotated, so it no longer lies on the pixels "
                      f"it labels",
                      fix=f"apply the same random geometric transform to `{target}` (a joint transform: "
                          f"torchvision.transforms.v2 with tv_tensors.Mask, albumentations' transform(image=..., "
                          f"mask=...)), and keep colour and normalisation transforms for the input only")
        for first, second, callee in _pairs(ix, fn):
            a, b = dotted(first.args[0]), dotted(second.args[0])
            yield Hit("labels-unrelated-to-inputs", second,
                      f"`{a}` (line {first.lineno}) and `{b}`, returned together, go through {callee}() with "
                      f"separate random draws: each gets its own shift, crop or flip, so the target no longer lies "
                      f"on the input it labels",
                      fix=f"draw the random parameters once and pass the same draw to both {callee}() calls (or use "
                          f"a transform that takes the input and the target together)")
