"""A span extracted from token offsets reproduces the words its tokens cover (slug ``metric-imperfect-on-truth``;
issue 33, session 47).

Extractive question answering is scored on text: the predicted start and end tokens are turned back into a
piece of the context through the tokenizer's character offsets, and that text is compared with the gold
answers.  The gold answers are pieces of the context made of whole words, so a correct extraction gives a
prediction that points at exactly a word's tokens that word, character for character.  A function that
breaks it scores a perfect prediction as wrong, for every model: offsets that start one character into a
word (byte-level tokenizers with a whitespace pre-tokenizer), an end offset read as inclusive, a slice from
the wrong token's offsets.

The check is a metamorphic call of the user's function, at the end of the run, on its first call's own
context and offsets: a function of the script called with one string (the context), one sequence of
``(start, end)`` character offsets (a list of pairs, or an integer ``(n, 2)`` tensor/array) and two token
indices, returning a string.  The context's whitespace-separated words are grouped with the tokens whose
offsets fall in them; for each word inside the window (the first and the last are left out: a window of a
long context may begin or end inside a word) the function is called with the word's first and last token,
and must return the word.  Compared without case, punctuation and surrounding whitespace; an empty answer
(a normaliser that drops articles) is not counted.  Reported when at least three words were probed and most
come back as other text.  Silent when the premise cannot be proven: offsets that overlap, go backwards, or
leave the context, tokens that cross a word boundary, a call that raises, a result that is not a string.
"""

from __future__ import annotations

import re
import string
from typing import Any, Callable

import numpy as np
import torch

MIN_WORDS = 3
MAX_WORDS = 24
_PUNCT = re.compile("[" + re.escape(string.punctuation) + r"\s]+")


def form_of(fn: Any, params: list[str]) -> str | None:
    """"span" for a function that may extract a span (three to six parameters), else None; whether it does is
    decided by the values of its first call."""
    return "span" if 3 <= len(params) <= 6 else None


def _offsets(x: Any) -> list[tuple[int, int]] | None:
    if isinstance(x, torch.Tensor):
        if x.ndim != 2 or x.shape[1] != 2 or x.is_floating_point() or x.dtype == torch.bool:
            return None
        return [(int(a), int(b)) for a, b in x.tolist()]
    if isinstance(x, np.ndarray):
        if x.ndim != 2 or x.shape[1] != 2 or x.dtype.kind not in "iu":
            return None
        return [(int(a), int(b)) for a, b in x.tolist()]
    if not isinstance(x, (list, tuple)) or len(x) < 2:
        return None
    out = []
    for pair in x:
        if not isinstance(pair, (list, tuple)) or len(pair) != 2 \
                or any(isinstance(v, bool) or not isinstance(v, int) for v in pair):
            return None
        out.append((pair[0], pair[1]))
    return out


def fits(given: dict[str, Any], result: Any) -> tuple[str, str, str, str] | None:
    """(context, offsets, start, end) parameters when the call has the form of a span extraction."""
    if not isinstance(result, str):
        return None
    texts = [p for p, v in given.items() if isinstance(v, str) and v.strip()]
    offsets = [p for p, v in given.items() if not isinstance(v, str) and _offsets(v) is not None]
    ints = [p for p, v in given.items() if isinstance(v, int) and not isinstance(v, bool)]
    if len(texts) != 1 or len(offsets) != 1 or len(ints) != 2:
        return None
    return texts[0], offsets[0], ints[0], ints[1]


def _norm(text: str) -> str:
    return _PUNCT.sub(" ", text.lower()).strip()


def _groups(context: str, offsets: list[tuple[int, int]]) -> list[tuple[str, int, int]] | None:
    """(word, first token, last token) of each word of the context its tokens cover, in order; None when the
    offsets are not a tokenisation of the context (overlapping, backwards, outside it, across words)."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", context)]
    starts = [s for s, _ in words]
    owner: dict[int, list[int]] = {}
    last_end = 0
    for i, (a, b) in enumerate(offsets):
        if not 0 <= a <= b <= len(context):
            return None
        if a == b:
            continue  # special tokens, padding
        if a < last_end:
            return None  # overlapping or backwards offsets: not one token per character
        last_end = b
        inner = [k for k in range(a, b) if not context[k].isspace()]
        if not inner:
            continue
        w = int(np.searchsorted(starts, inner[0], side="right")) - 1
        if w < 0 or not words[w][0] <= inner[-1] < words[w][1]:
            return None  # a token across words
        owner.setdefault(w, []).append(i)
    groups = []
    for w in sorted(owner):
        tokens = owner[w]
        if tokens != list(range(tokens[0], tokens[-1] + 1)):
            return None
        groups.append((context[words[w][0]:words[w][1]], tokens[0], tokens[-1]))
    return groups


def check(fn: Callable, name: str, given: dict[str, Any], bound: dict[str, Any],
          result: Any) -> tuple[str, str] | None:
    """(message, fix) when the function turns most words' own tokens into other text; None otherwise."""
    from overt.guards.metricdef import _quiet

    roles = fits(given, result)
    if roles is None:
        return None
    text_p, offsets_p, start_p, end_p = roles
    context = given[text_p]
    offsets = _offsets(given[offsets_p])
    groups = _groups(context, offsets) if offsets is not None else None
    if not groups or len(groups) < MIN_WORDS + 2:
        return None
    probed, wrong = 0, []
    for word, first, last in groups[1:-1][:MAX_WORDS]:
        args = dict(bound)
        args[start_p], args[end_p] = first, last
        try:
            got = _quiet(fn, **args)
        except Exception:  # noqa: BLE001  the user's function on other indices: no premise
            return None
        if not isinstance(got, str):
            return None
        if not _norm(got):
            continue
        probed += 1
        if _norm(got) != _norm(word):
            wrong.append((word, got, first, last))
    if probed < MIN_WORDS or 2 * len(wrong) <= probed:
        return None
    word, got, first, last = wrong[0]
    return (f"{name}() turns a prediction that points exactly at a word's tokens into other text: on its call's own "
            f"context and offsets, tokens {first}..{last} (the word {word!r}) give {got!r}, and {len(wrong)} of "
            f"{probed} words probed come back wrong. Gold answers are words of the context, so every prediction "
            f"that is exactly right is scored as wrong: the offsets it slices by do not start and end where the "
            f"tokens' words do (a start offset one character into the word, an end read as inclusive).",
            f"make {name}(context, offsets, i, j) return the context's text of tokens i..j: extend a start offset "
            f"that points inside a word back to the word's start (as long as the previous token does not cover "
            f"it), and check it on one example whose predicted span is the gold span")
