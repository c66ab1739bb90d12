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
            line = ix.source_lines[call.end_lineno - 1] if call.end_lineno <= len(ix.source_lines) else ""
            close = call.end_col_offset - 1
            if line[close:close + 1] == ")":
                head = line[:close].rstrip()
                sep = "" if head.endswith(("(", ",")) else ", "
                sep = " " if head.endswith(",") else sep
                edits = [Edit(call.end_lineno, close, call.end_lineno, close, f"{sep}weights_only=True")]
                note = "torch.load(...) -> torch.load(..., weights_only=True)"
        what = "weights_only=False" if flag is not None else "without weights_only=True"
        yield Hit("unsafe-load", call,
                  f"torch.load {what} unpickles arbitrary objects, so loading a checkpoint can run code hidden "
                  f"in it; pass weights_only=True and save state_dicts (or use safetensors)",
                  edits=edits, fix_note=note)


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
                      f"the file breaks when the code is refactored or renamed; save {text}.state_dict() and "
                      f"load it into a freshly built model")


@rule("dataparallel")
def dataparallel(ix: FileIndex) -> Iterator[Hit]:
    for call in ix.calls:
        q = ix.qualname(call.func) or ""
        if q.rsplit(".", 1)[-1] == "DataParallel" and ix.is_torchish(q):
            yield Hit("dataparallel", call,
                      "nn.DataParallel runs one process that scatters every batch and gathers outputs on one GPU: "
                      "slower and unbalanced, and PyTorch recommends against it; use "
                      "torch.nn.parallel.DistributedDataParallel (one process per GPU, torchrun)")
