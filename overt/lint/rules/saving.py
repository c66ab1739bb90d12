"""Rules about saving, loading and parallel wrappers (OVT6xx)."""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, has_star_kwargs, is_const, kwarg
from overt.lint.rules.base import Edit, Hit, rule


def _is(ix: FileIndex, call: ast.Call, qual: str) -> bool:
    q = ix.qualname(call.func) or ""
    return q == qual


@rule("unsafe-load", fixable=True)
def unsafe_load(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if not _is(ix, call, "torch.load") or has_star_kwargs(call):
            continue
        flag = kwarg(call, "weights_only")
        if flag is not None and not is_const(flag, False):
            continue
        edits, note = [], ""
        if flag is None:
            edits = _weights_only_edit(ix, call)
            note = "torch.load(...) -> torch.load(..., weights_only=True)" if edits else ""
        what = "weights_only=False" if flag is not None else "without weights_only=True"
        yield Hit("unsafe-load", call,
                  f"torch.load {what} unpickles arbitrary objects, so loading a checkpoint can run code hidden "
                  f"in it", fix="pass weights_only=True and save state_dicts (or use safetensors)",
                  edits=edits, fix_note=note)


def _weights_only_edit(ix: FileIndex, call: ast.Call) -> list[Edit]:
    """Insert ``weights_only=True`` as the last argument of ``call`` (columns in UTF-8 bytes)."""
    lines = ix.source_lines
    if call.end_lineno > len(lines):
        return []
    line = lines[call.end_lineno - 1].encode("utf-8")
    close = call.end_col_offset - 1
    if line[close:close + 1] != b")":
        return []
    head = line[:close].rstrip()
    if head:  # `torch.load(a)`, `torch.load(a, )`, `torch.load(`+`)`
        sep = "" if head.endswith(b"(") else " " if head.endswith(b",") else ", "
        return [Edit(call.end_lineno, close, call.end_lineno, close, f"{sep}weights_only=True")]
    # `)` on a line of its own: the argument goes on a line before it
    prev = call.end_lineno - 1
    while prev > call.lineno and not lines[prev - 1].strip():
        prev -= 1
    text = lines[prev - 1]
    indent = text[:len(text) - len(text.lstrip())]
    if text.rstrip().endswith(","):
        return [Edit(call.end_lineno, 0, call.end_lineno, 0, f"{indent}weights_only=True,\n")]
    end = len(text.rstrip().encode("utf-8"))
    return [Edit(prev, end, prev, end, ", weights_only=True")]


@rule("whole-model-save")
def whole_model_save(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        if not _is(ix, call, "torch.save") or not call.args:
            continue
        obj = call.args[0]
        text = dotted(obj)
        if text and isinstance(obj, (ast.Name, ast.Attribute)) and ix.is_model(text):
            yield Hit("whole-model-save", call,
                      f"torch.save({text}, ...) pickles the whole module, including its class's import path, so "
                      f"the file breaks when the code is refactored or renamed", fix=f"save {text}.state_dict() and "
                      f"load it into a freshly built model")


@rule("dataparallel")
def dataparallel(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if q.rsplit(".", 1)[-1] == "DataParallel" and ix.is_torchish(q):
            yield Hit("dataparallel", call,
                      "nn.DataParallel runs one process that scatters every batch and gathers outputs on one GPU: "
                      "slower and unbalanced, and PyTorch recommends against it", fix="use "
                      "torch.nn.parallel.DistributedDataParallel (one process per GPU, torchrun)")
