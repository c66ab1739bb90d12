"""Last-token pooling at ``mask.sum(1) - 1`` on left-padded batches (OVT417 ``last-token-left-padding``,
issue 33).

``attention_mask.sum(dim=1) - 1`` is the position of a sequence's last real token only when the
padding is on the right.  With left padding (decoder models' usual ``tokenizer.padding_side =
"left"``) the real tokens end at the last position of every row, and ``sum - 1`` points into the
padding or the middle of the sequence for every row shorter than its batch's longest: the classifier
or embedding reads the wrong token, and which one depends on the other sequences of the batch
(huggingface/peft#3620: "the auxiliary sequence-classification loss trains against a padding
position").

The rule: ``M.sum(...) - 1`` (or ``torch.sum(M, ...) - 1``) of a name whose words say mask, used as an
index (inside a subscript, ``gather``/``index_select``, through a name bound to it in the same scope,
or returned by a helper that is called inside a subscript), in a file that pads on the left: it sets
``padding_side = "left"`` (an assignment or a keyword) or writes sequences right-aligned into a
padded tensor (``ids[i, width - len(s):] = ...``).  Quiet when the file also pads on the right, tests the
padding side, or branches on the padding (``if left_padding:``, a test of the mask's last column:
code that handles both).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, tokens
from overt.lint.rules.base import Hit, rule

_KEEP = frozenset({"long", "int", "to", "clamp", "clamp_min", "unsqueeze", "view", "cpu", "type"})


def _mask_sum_minus_one(node: ast.AST, ix: FileIndex | None = None) -> str | None:
    """The mask's name when ``node`` is ``mask.sum(...) - 1`` (or ``lengths - 1`` with ``lengths`` bound once
    in the same scope to ``mask.sum(...)``)."""
    if not (isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub) and isinstance(node.right, ast.Constant)
            and node.right.value == 1):
        return None
    call = node.left
    while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in (
            "long", "int", "to", "type", "cpu"):
        call = call.func.value  # mask.sum(1).long() - 1
    if isinstance(call, ast.Name) and ix is not None:
        scope = ix.enclosing_function(call) or ix.tree
        bound = [n.value for n in ix.scope_nodes(scope) if isinstance(n, ast.Assign) and len(n.targets) == 1
                 and isinstance(n.targets[0], ast.Name) and n.targets[0].id == call.id]
        if len(bound) != 1:
            return None
        call = bound[0]
        while isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute) and call.func.attr in (
                "long", "int", "to", "type", "cpu"):
            call = call.func.value
    if not isinstance(call, ast.Call):
        return None
    if isinstance(call.func, ast.Attribute) and call.func.attr == "sum":
        base = call.func.value if dotted(call.func.value) not in ("torch", "np", "numpy") else (
            call.args[0] if call.args else None)
    else:
        return None
    if isinstance(base, ast.Subscript) and isinstance(base.slice, ast.Constant) and isinstance(base.slice.value, str):
        name: str | None = base.slice.value  # batch["attention_mask"]
    else:
        name = dotted(base) if base is not None else None
    return name if name and "mask" in tokens(name) else None


def _pads(ix: FileIndex) -> tuple[ast.AST | None, bool]:
    """(evidence of left padding, whether the file also pads right or tests the side)."""
    left: ast.AST | None = None
    other = False
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Attribute) and t.attr == "padding_side" and isinstance(node.value, ast.Constant):
                    if node.value.value == "left":
                        left = left or node
                    else:
                        other = True
                elif isinstance(t, ast.Subscript) and _right_aligned(t) and left is None:
                    left = node
        elif isinstance(node, ast.keyword) and node.arg == "padding_side" and isinstance(node.value, ast.Constant):
            if node.value.value == "left":
                left = left or node.value
            else:
                other = True
        elif isinstance(node, ast.Compare) and any("padding_side" in (dotted(n) or "") for n in
                                                   [node.left, *node.comparators]):
            other = True
        elif isinstance(node, (ast.If, ast.IfExp)) and _tests_padding(node.test):
            other = True
    return left, other


def _tests_padding(test: ast.AST) -> bool:
    """A branch on the padding: ``if left_padding:`` or on the mask's last column (``mask[:, -1].sum() == n``,
    the embedding models' idiom that takes ``hidden[:, -1]`` when every row ends in a real token)."""
    for node in ast.walk(test):
        if isinstance(node, ast.Name) and {"pad", "padding", "padded"} & set(tokens(node.id)):
            return True
        if isinstance(node, ast.Subscript) and "mask" in tokens(dotted(node.value) or "_"):
            sl = node.slice
            last = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
            if isinstance(last, ast.UnaryOp) and isinstance(last.op, ast.USub):
                return True
    return False


def _right_aligned(target: ast.Subscript) -> bool:
    """``x[i, W - len(s):]`` or ``x[i, -len(s):]`` as an assignment target: a row written flush right."""
    sl = target.slice
    last = sl.elts[-1] if isinstance(sl, ast.Tuple) and sl.elts else sl
    if not (isinstance(last, ast.Slice) and last.upper is None and last.step is None and last.lower is not None):
        return False
    low = last.lower
    tail = low.right if isinstance(low, ast.BinOp) and isinstance(low.op, ast.Sub) else (
        low.operand if isinstance(low, ast.UnaryOp) and isinstance(low.op, ast.USub) else None)
    return isinstance(tail, ast.Call) and isinstance(tail.func, ast.Name) and tail.func.id == "len"


def _outer(ix: FileIndex, node: ast.AST) -> ast.AST:
    """``node`` seen through ``.long()``/``.to(...)`` calls and parentheses around it."""
    while True:
        parent = ix.parents.get(node)
        if isinstance(parent, ast.Attribute) and parent.attr in _KEEP and isinstance(ix.parents.get(parent), ast.Call):
            node = ix.parents[parent]
        else:
            return node


def _in_index(ix: FileIndex, node: ast.AST) -> bool:
    for anc in ix.ancestors(node):
        if isinstance(anc, ast.Subscript) and anc.slice is not None and (
                anc.slice is node or any(n is node for n in ast.walk(anc.slice))):
            return True
        if isinstance(anc, ast.Call) and isinstance(anc.func, ast.Attribute) and anc.func.attr in (
                "gather", "index_select", "take_along_dim"):
            return True
        if isinstance(anc, ast.stmt):
            return False
    return False


def _used_as_index(ix: FileIndex, expr: ast.AST) -> bool:
    node = _outer(ix, expr)
    if _in_index(ix, node):
        return True
    parent = ix.parents.get(node)
    scope = ix.enclosing_function(node) or ix.tree
    if isinstance(parent, ast.Assign) and len(parent.targets) == 1 and isinstance(parent.targets[0], ast.Name):
        name = parent.targets[0].id
        return any(isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Load) and _in_index(ix, n)
                   for n in ix.scope_nodes(scope))
    if isinstance(parent, ast.Return) and ix.enclosing_function(node) is not None:
        return any(_in_index(ix, site) for site in ix.call_sites(ix.enclosing_function(node)))
    return False


@rule("last-token-left-padding")
def last_token_left_padding(ix: FileIndex) -> Iterator[Hit]:
    """``hidden[rows, attention_mask.sum(1) - 1]`` on left-padded batches (issue 33, huggingface/peft#3620)."""
    evidence: tuple[ast.AST | None, bool] | None = None
    for node in ast.walk(ix.tree):
        mask = _mask_sum_minus_one(node, ix)
        if mask is None or not _used_as_index(ix, node):
            continue
        if evidence is None:
            evidence = _pads(ix)
        left, other = evidence
        if left is None or other:
            continue
        yield Hit("last-token-left-padding", node,
                  f"`{ast.unparse(node)}` is the last real token's position only with right padding, but this file "
                  f"pads on the left (line {left.lineno}: `{ast.unparse(left).strip()[:60]}`): for every sequence "
                  f"shorter than its batch's longest the index points into the padding or the middle of the "
                  f"sequence, so the pooled vector (and the prediction) depends on the rest of the batch",
                  fix=f"with left padding the last real token is at position -1 of every row; for either side take "
                      f"the rightmost nonzero position: (torch.arange({mask}.shape[1]) * {mask}).argmax(1)")
