"""A decoded sequence ends at its first end token, whatever else is in its batch (slug ``metric-off-definition``;
issue 33, session 53).

Premise: a batched decoding function (``generate``, ``greedy_decode``, ``beam_search``, ``translate`` ...) decodes
each row as it would decode that row alone; in particular a row that emitted its end token is finished, and what
the batch goes on computing for the rows still running is no part of it.  A batched loop that stops only when
every row has ended and returns the raw tokens keeps, in each row that ended earlier, whatever the decoder emits
after the end token (lucidrains/h-transformer-1d#9, w383): every scorer that compares or reads the whole row then
scores tokens past the sequence's end, while each row decoded alone is right.

Observed on values: the function's first evaluation call that returns one integer tensor ``(B, T)`` of a batch of
``B`` rows (an argument tensor, list or tuple of that length along its first dimension) is called again at the end
of the run, as user code, quietly, without gradients (torch's, Python's and NumPy's random generators and the
model's buffers and attributes put back): once on the whole batch (the same tokens, or the function is not
deterministic there: silent), then on each of its first :data:`ROWS` rows alone (every batch argument sliced to
that row).  Reported when rows differ, and every one that differs has the same form: alone, the row is a prefix
ending with one token ``e`` followed by one pad value up to the batch's width (the function's own convention
for an ended row); in the batch, the same prefix followed by other tokens.  A decoder that returns raw tokens
of another width alone (its caller may cut each row at its end) is left alone.  ``e`` is the end token (named when the function reads a module-level name that holds it).
Silent on any other difference (a model whose output depends on the batch is ``batch-dependent-eval``'s), on a
sampling function (the repeat differs), on calls that took longer than :data:`SLOW_S` seconds, on batches of
fewer than :data:`MIN_ROWS` rows.
"""

from __future__ import annotations

import time
import types
from typing import Any, Callable

import numpy as np
import torch
from torch import nn

#: name words of a decoding function
WORDS = frozenset({"generate", "generation", "decode", "decoding", "greedy", "beam", "translate", "autoregressive",
                   "autoregressively"})
#: name words that make such a name something else (a loss, CTC decoding, text detokenisation, an encoder)
NOT = frozenset({"loss", "ctc", "text", "str", "string", "encode", "encoder", "data", "dataset", "mask", "masks",
                 "step", "train"})
ROWS = 8  # rows decoded alone
MIN_ROWS = 4  # rows a batch needs
MIN_DIFFER = 2  # rows that must differ, each of the named form
SLOW_S = 5.0  # a recorded call slower than this is not called again ROWS + 1 times


def form_of(words: frozenset[str]) -> str | None:
    """"decode" for a function named as a batched decoder, else None."""
    return "decode" if words & WORDS and not words & NOT else None


def _batch(result: Any) -> int | None:
    if not isinstance(result, torch.Tensor) or result.ndim != 2 or result.is_floating_point() \
            or result.is_complex() or result.dtype == torch.bool:
        return None
    return int(result.shape[0]) if result.shape[0] >= MIN_ROWS and result.shape[1] >= 2 else None


def _rowed(value: Any, b: int) -> bool:
    if isinstance(value, torch.Tensor):
        return value.ndim >= 1 and value.shape[0] == b
    if isinstance(value, np.ndarray):
        return value.ndim >= 1 and value.shape[0] == b
    return isinstance(value, (list, tuple)) and len(value) == b


def fits(bound: dict[str, Any], result: Any) -> bool:
    """Whether a call has the form the probe reads: a batch of token rows returned for a batch argument."""
    b = _batch(result)
    return b is not None and any(_rowed(v, b) for v in bound.values())


def _row(value: Any, b: int, i: int) -> Any:
    if isinstance(value, (torch.Tensor, np.ndarray)) and _rowed(value, b):
        return value[i:i + 1]
    if isinstance(value, (list, tuple)) and len(value) == b:
        return type(value)([value[i]])
    return value


def _end(alone: list[int], batched: list[int]) -> tuple[int, int] | None:
    """(end token, pad) when the row alone, of the batched row's width, is its prefix up to and including one
    token, then one pad value to the end, while the batched row goes on with other tokens; None otherwise."""
    j = 0
    while j < min(len(alone), len(batched)) and alone[j] == batched[j]:
        j += 1
    if j == 0 or j >= len(batched) or len(alone) != len(batched):
        return None  # the row alone padded to the batch's width shows the function's own convention for ended rows
    rest = alone[j:]
    pad = rest[0]
    if any(v != pad for v in rest):
        return None
    end = alone[j - 1]
    if end in alone[:j - 1]:  # the end token's first occurrence is where the row stops
        return None
    tail = batched[j:]
    if all(v == pad for v in tail):
        return None
    return end, pad


def _root(bound: dict[str, Any], models: list[nn.Module]) -> nn.Module | None:
    for v in bound.values():
        if isinstance(v, nn.Module):
            return v
    return models[0] if models else None


def _named(fn: Callable, end: int) -> str | None:
    """A module-level name the function reads that holds the end token."""
    code = getattr(fn, "__code__", None)
    glob = getattr(fn, "__globals__", {})
    if code is None:
        return None

    def names(c: types.CodeType) -> list[str]:
        out = list(c.co_names)
        for k in c.co_consts:
            if isinstance(k, types.CodeType):
                out += names(k)
        return out

    for n in names(code):
        v = glob.get(n)
        if isinstance(v, int) and not isinstance(v, bool) and v == end \
                and any(w in n.lower() for w in ("eos", "end", "stop")):
            return n
    return None


def check(fn: Callable, name: str, bound: dict[str, Any], result: Any, seconds: float,
          models: list[nn.Module]) -> tuple[str, str] | None:
    """(message, fix) when rows decoded alone end at one end token where, in their batch, they go on."""
    from overt.guards.rerun import rerun

    b = _batch(result)
    if b is None or seconds > SLOW_S:
        return None
    root = _root(bound, models)
    device = next((p.device for p in root.parameters()), None) if root is not None else None
    rows = list(range(min(ROWS, b)))
    found: list[tuple[int, int, int | None, list[int], list[int]]] = []
    with rerun(root, device), torch.no_grad():
        try:
            again = fn(**bound)
        except Exception:  # noqa: BLE001  the user's function called again: no premise
            return None
        if not isinstance(again, torch.Tensor) or again.shape != result.shape or not torch.equal(again.cpu(),
                                                                                              result.cpu()):
            return None
        whole = result.detach().cpu().tolist()
        for i in rows:
            args = {k: _row(v, b, i) for k, v in bound.items()}
            try:
                alone = fn(**args)
            except Exception:  # noqa: BLE001  a row alone the function does not take: no premise
                return None
            if not isinstance(alone, torch.Tensor) or alone.ndim != 2 or alone.shape[0] != 1 \
                    or alone.is_floating_point():
                return None
            one = alone.detach().cpu().tolist()[0]
            if one == whole[i]:
                continue
            form = _end(one, whole[i])
            if form is None:
                return None  # a difference of another kind: not this premise's to name
            found.append((i, *form, one, whole[i]))
    if len(found) < MIN_DIFFER or len(found) * 4 < len(rows):
        return None
    ends = {f[1] for f in found}
    pads = {f[2] for f in found}
    if len(ends) != 1 or len(pads) != 1:
        return None
    end = ends.pop()
    i, _, pad, one, row = found[0]
    known = _named(fn, end)
    shown = f"{end} ({known})" if known else f"{end}"
    cut = one.index(end) + 1
    return (f"{len(found)} of the {len(rows)} rows it was given first, decoded alone, end at the token {shown} "
            f"(then the pad value {pad} to the end of the row), while in the batch "
            f"the same rows go on after it: row {i} is {row[:cut]} then {row[cut:cut + 6]}"
            f"{'...' if len(row) > cut + 6 else ''} in the batch, {one[:cut + 3]}{'...' if len(one) > cut + 3 else ''} "
            "alone. A sequence ends at its first end token; a batched loop that runs until every row has ended "
            "and returns the raw tokens keeps, in each row that ended earlier, what the decoder emitted after its "
            "end, so every score that reads the whole row (an exact match, a token accuracy, a BLEU over the "
            "ids) judges tokens past the sequence's end.",
            f"in {name}(), replace every token after a row's first end token by the pad value before returning "
            f"(ended = (out == {known or end}).cumsum(1); out = out.masked_fill((ended - (out == {known or end}).long()) "
            "> 0, PAD)), or keep a per-row `finished` mask in the loop and write the pad token into finished rows; "
            "check it by decoding one row alone: it must match its row of the batch.")
