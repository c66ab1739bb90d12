"""``eval-samples-repeated`` in the code: a count over the samples a padding ``DistributedSampler`` deals out,
divided by the size of the data set (issue 33, coverage of the evaluation data; pytorch/pytorch#25162).

A ``DistributedSampler`` without ``drop_last=True`` pads the data set with repeats of its first samples so that
every rank gets as many (``ceil(len(dataset) / world_size)`` each).  A count accumulated over its samples
(``correct += ...``, ``hits.append(...)``) and summed over the ranks then includes the repeats: divided by
``len(dataset)``, the number reported is not the metric over the data set (w103: 0.89 for a model whose
accuracy is 0.70).  Seen when, in one function (or the module), an evaluation loop (under ``no_grad``, or named
as one) runs over such a sampler (directly, or through ``DataLoader(..., sampler=...)``), a name is accumulated
in it, and that name (``x``, ``sum(x)``, ``len(x)``, ``x.item()``) is later divided by ``len(`` the sampler's
data set ``)`` or ``len(loader.dataset)``.  Results gathered and cut to ``len(dataset)``, or counted once per
index, divide something else and are not flagged.  Whether the set is padded at all depends on sizes lint
cannot see (a length that is a multiple of the world size pads nothing): a warning all the same, since the
number is right only while the sizes happen to divide (torchvision's reference scripts warn at run time when
they do not).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, is_const, kwarg
from overt.lint.rules.base import Hit, rule
from overt.lint.rules.seedscored import context_scored


def _single(ix: FileIndex, node: ast.AST | None) -> ast.AST | None:
    """A name assigned exactly once in the file: its value; anything else as it is."""
    if isinstance(node, ast.Name):
        made = ix.assigns.get(node.id, [])
        if len(made) == 1:
            return made[0]
    return node


def _padding_sampler(ix: FileIndex, node: ast.AST | None) -> ast.Call | None:
    """The ``DistributedSampler(...)`` call ``node`` is (or names), when it pads (no ``drop_last=True``)."""
    node = _single(ix, node)
    if isinstance(node, ast.Call) and ix.call_is(node, "DistributedSampler") and node.args \
            and not is_const(kwarg(node, "drop_last"), True):
        return node
    return None


def _loop_sampler(ix: FileIndex, loop: ast.For) -> tuple[ast.Call, ast.AST | None] | None:
    """(the padding sampler a loop draws from, the loader it goes through or None)."""
    it = loop.iter
    while isinstance(it, ast.Call) and (dotted(it.func) or "").rsplit(".", 1)[-1] in ("enumerate", "tqdm") \
            and it.args:
        it = it.args[0]
    sampler = _padding_sampler(ix, it)
    if sampler is not None:
        return sampler, None
    loader = _single(ix, it)
    if isinstance(loader, ast.Call) and ix.call_is(loader, "DataLoader"):
        sampler = _padding_sampler(ix, kwarg(loader, "sampler"))
        if sampler is not None:
            return sampler, it
    return None


def _accumulated(ix: FileIndex, loop: ast.For) -> set[str]:
    """Names grown in ``loop``: ``n += ...``, ``xs.append(...)``, ``xs.extend(...)``."""
    out = set()
    for n in ix.scope_nodes(loop):
        if isinstance(n, ast.AugAssign) and isinstance(n.op, ast.Add) and isinstance(n.target, ast.Name):
            out.add(n.target.id)
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in ("append", "extend") \
                and isinstance(n.func.value, ast.Name):
            out.add(n.func.value.id)
    return out


def _counted(node: ast.AST) -> str | None:
    """The name under ``x``, ``sum(x)``, ``len(x)``, ``x.item()``, ``float(x)``, ``100 * x``, ``torch.cat(x)``."""
    while True:
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            node = node.right if isinstance(node.left, ast.Constant) else node.left
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
                and node.func.id in ("sum", "len", "float", "int") and len(node.args) == 1:
            node = node.args[0]
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("item", "sum", "float") and not node.args:
            node = node.func.value
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in (
                "cat", "stack", "concatenate", "tensor", "array") and node.args:
            node = node.args[0]
        else:
            return node.id if isinstance(node, ast.Name) else None


def _data_set_length(ix: FileIndex, den: ast.AST, sampler: ast.Call, loader: ast.AST | None) -> bool:
    """``len(ds)`` of the sampler's data set, or ``len(loader.dataset)``."""
    den = _single(ix, den)
    if not (isinstance(den, ast.Call) and isinstance(den.func, ast.Name) and den.func.id == "len" and den.args):
        return False
    arg = dotted(den.args[0])
    return arg is not None and (arg == dotted(sampler.args[0])
                                or (loader is not None and arg == f"{dotted(loader)}.dataset"))


@rule("eval-samples-repeated")
def eval_samples_repeated(ix: FileIndex) -> Iterator[Hit]:
    """A count over a padding ``DistributedSampler``'s samples divided by the size of the data set; seed
    batches scored with their sampled context (:mod:`.seedscored`)."""
    seen: set[int] = set()
    for loop in ix.loops:
        if not isinstance(loop, ast.For) or not ix.under_no_grad(loop):
            continue
        drawn = _loop_sampler(ix, loop)
        if drawn is None:
            continue
        sampler, loader = drawn
        grown = _accumulated(ix, loop)
        if not grown:
            continue
        scope = ix.enclosing_function(loop) or ix.tree
        for node in ix.scope_nodes(scope):
            if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Div)) or id(node) in seen \
                    or node.lineno <= loop.lineno or any(a is loop for a in ix.ancestors(node)):
                continue
            name = _counted(node.left)
            if name not in grown or not _data_set_length(ix, node.right, sampler, loader):
                continue
            seen.add(id(node))
            data = dotted(sampler.args[0])
            yield Hit("eval-samples-repeated", node,
                      f"'{name}' is accumulated over the samples that DistributedSampler (line {sampler.lineno}) "
                      f"deals to the ranks, then divided by len({data}): unless len({data}) is a multiple of the "
                      f"world size, the sampler pads the set with repeats of its first samples so that every rank "
                      f"gets as many, and the count summed over the ranks includes the repeats (pytorch/pytorch"
                      f"#25162): the number reported is not the metric over {data}",
                      fix="gather the per-sample results with their dataset indices and count each index once (or "
                          "keep the first len(dataset) gathered results), or evaluate with a sampler that does not "
                          "pad")
    yield from context_scored(ix)
