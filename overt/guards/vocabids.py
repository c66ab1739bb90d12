"""Guard on a vocabulary that gives two tokens one id (slug ``vocabulary-ids-shared``; issue 33, round nineteen).

An invariant of every program that numbers tokens, tags or classes: a vocabulary is one-to-one.  Its map from
token to id gives each token its own id, and its map back from id to token returns the token it was given.  Two
tokens under one id merge them: the model is trained on one id for both, and decoding turns one into the other
(FudanNLP/fastNLP#252: padding and unknown set to the same tag, so the unknown entry overwrote the padding one at
``len(word2idx)``, which was then 1, and the first real tag was numbered 1 as well).

Looked at twice, after the first checked step and at the end of the run, in the running script's
namespace: its global names, the attributes of the objects they hold, and theirs (three levels, at most
:data:`MAX_OBJECTS` objects).  A vocabulary is a container (the namespace or one object) holding both a map from
strings to ids (a dict of at least :data:`MIN_TOKENS` string keys and integer values, every id in
``[0, len)``: numbered by count) and a map back (a dict from int to str, or a list or tuple of strings, of at
least as many ids as the largest id) that returns the same string for at least half of the tokens.  Reported when
the forward map holds an id under two or more tokens, the map back returns another token for one of them, and
an id below the largest belongs to no token and decodes to nothing: the number a token got by the count before a
later write gave it the next one.  A label map that merges synonyms on purpose (``{"nil": 0, "zero": 0, "one":
1}``, with a class list as its map back) leaves no such gap and is silent, as are maps with no map back, ids at or
beyond the count or negative (codes, sizes, settings), and one-to-one vocabularies.  Not seen: two entries given
one constant with the count starting after them (no gap).
"""

from __future__ import annotations

import re
import sys
import types
from typing import Any

from overt.guards.check import Check
from overt.guards.where import short_location

MIN_TOKENS = 3  # fewest tokens in a vocabulary judged
MAX_TOKENS = 2_000_000  # larger maps are not read
MAX_OBJECTS = 2000  # objects visited in the namespace walk
DEPTH = 3  # levels of attributes below the script's globals


def _forward_map(d: Any) -> bool:
    """Whether ``d`` is a dict from strings to ints numbered by count (every id in ``[0, len)``)."""
    if type(d) is not dict or not MIN_TOKENS <= len(d) <= MAX_TOKENS:
        return False
    n = len(d)
    for k, v in d.items():
        if type(k) is not str or type(v) is not int or not 0 <= v < n:
            return False
    return True


def _lookup(back: Any, i: int) -> Any:
    if isinstance(back, dict):
        return back.get(i)
    return back[i] if 0 <= i < len(back) else None


def _backward_map(back: Any, d: dict) -> bool:
    """Whether ``back`` maps ids to strings and returns most tokens of ``d`` from their ids."""
    if type(back) is dict:
        if not back or not all(type(k) is int and type(v) is str for k, v in back.items()):
            return False
    elif type(back) in (list, tuple):
        if not back or not all(type(v) is str for v in back):
            return False
    else:
        return False
    same = sum(1 for w, i in d.items() if _lookup(back, i) == w)
    return same * 2 >= len(d)


def _given_away(d: dict, back: Any) -> bool:
    """Whether an id below the largest one belongs to no token and decodes to nothing: a number the count gave a
    token that a later write moved to another id (a vocabulary that merges on purpose leaves no such gap)."""
    used = set(d.values())
    return any(i not in used and _lookup(back, i) is None for i in range(max(used) + 1))


def shared_ids(d: dict, back: Any) -> list[tuple[int, list[str], Any]]:
    """``(id, tokens under it, what the map back returns)`` for every id of ``d`` that two or more tokens share
    and that the map back turns into one of them only."""
    under: dict[int, list[str]] = {}
    for w, i in d.items():
        under.setdefault(i, []).append(w)
    return [(i, ws, _lookup(back, i)) for i, ws in under.items() if len(ws) > 1]


def _containers(namespace: dict) -> list[tuple[str, dict]]:
    """``(path, attribute dict)`` of the namespace and of the objects reachable from it (breadth first)."""
    out: list[tuple[str, dict]] = [("", namespace)]
    seen: set[int] = {id(namespace)}
    frontier: list[tuple[str, Any]] = [(k, v) for k, v in namespace.items() if not k.startswith("__")]
    for _ in range(DEPTH):
        nxt: list[tuple[str, Any]] = []
        for path, obj in frontier:
            if len(out) >= MAX_OBJECTS or id(obj) in seen:
                continue
            seen.add(id(obj))
            if isinstance(obj, (types.ModuleType, type, types.FunctionType, types.BuiltinFunctionType,
                                types.MethodType, str, bytes, int, float, dict, list, tuple, set)):
                continue
            attrs = getattr(obj, "__dict__", None)
            if type(attrs) is not dict:
                continue
            out.append((path, attrs))
            nxt.extend((f"{path}.{k}", v) for k, v in attrs.items() if not k.startswith("__"))
        frontier = nxt
    return out


def find(namespace: dict) -> list[tuple[str, str, list[tuple[int, list[str], Any]]]]:
    """``(path of the map, name of the map back, shared ids)`` for every vocabulary in ``namespace`` whose two
    directions disagree."""
    found = []
    for path, attrs in _containers(namespace):
        maps = [(k, v) for k, v in attrs.items() if _forward_map(v)]
        if not maps:
            continue
        backs = [(k, v) for k, v in attrs.items() if type(v) in (dict, list, tuple)]
        for name, d in maps:
            back = next(((k, b) for k, b in backs if b is not d and _backward_map(b, d)), None)
            if back is None or len(set(d.values())) == len(d):
                continue
            shared = shared_ids(d, back[1])
            if shared and _given_away(d, back[1]):
                found.append((f"{path}.{name}".lstrip("."), f"{path}.{back[0]}".lstrip("."), shared))
    return found


def _writes(filename: str, name: str) -> tuple[list[int], list[int]]:
    """Lines of the script that write an entry of a dict called ``name`` (``name[key] = ...``), and those of them
    not guarded by a membership test (``not in`` on the line or the one before): only such a write can give a
    token already there a second id."""
    try:
        with open(filename, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError:
        return [], []
    pattern = re.compile(rf"\b{re.escape(name)}\[[^\]]+\]\s*=[^=]")
    writes = [i for i, line in enumerate(lines) if pattern.search(line)]
    bare = [i for i in writes if "not in" not in lines[i] and (i == 0 or "not in" not in lines[i - 1])]
    return [i + 1 for i in writes], [i + 1 for i in bare]


class VocabularyIdChecks(Check):
    name = "vocabids"

    def __init__(self, session: Any):
        super().__init__(session)
        self.looked = False

    def after_checked_step(self, oi: Any) -> None:
        if not self.looked:  # once: the vocabularies are built before training
            self.looked = True
            self._look()

    def end_of_run(self) -> None:
        self._look()  # and those built after the first checked step (a report is made once per map)

    def _look(self) -> None:
        main = sys.modules.get("__main__")
        filename = getattr(main, "__file__", None)
        if main is None or not filename:
            return
        try:
            found = find(main.__dict__)
        except Exception as exc:  # a user's object that breaks on attribute access
            self.s.check_failed(self, exc)
            return
        for path, back, shared in found:
            self._report(filename, path, back, shared)

    def _report(self, filename: str, path: str, back: str, shared: list[tuple[int, list[str], Any]]) -> None:
        i, words, decoded = shared[0]
        lines, bare = _writes(filename, path.rsplit(".", 1)[-1])
        # a second id comes from a later unguarded write of a token an earlier write had added
        line = bare[-1] if bare else lines[0] if lines else None
        where = short_location(filename, line) if line else ""
        writes = f" (entries written at lines {', '.join(map(str, lines[:4]))})" if lines else ""
        shown = " and ".join(repr(w) for w in words[:3])
        more = f"; {len(shared) - 1} more ids are shared" if len(shared) > 1 else ""
        self.s.report(
            "vocabulary-ids-shared",
            f"the vocabulary {path}{writes} gives {shown} the one id {i}, and its map back {back} turns id {i} into "
            f"{decoded!r} only{more}: two tokens under one id are one token to the model, so it is trained on them "
            f"merged and everything decoded from id {i} comes back as {decoded!r}.",
            fix="give every token its own id: add an entry only when its token is not in the vocabulary yet (two "
            "special tokens set to the same string are one entry), and number entries by the vocabulary's size "
            "after the insertion, not by a constant shared with another token.",
            where=where, key=path,
        )
