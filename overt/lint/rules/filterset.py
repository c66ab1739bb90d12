"""A filtered ranking whose filter leaves out a split of the known positives (part of OVT542
``disjoint-sets-overlap``).

In the filtered setting of link prediction (and of any evaluation that ranks a held-out positive against
corruptions), the candidates a test positive is ranked against must be disjoint from every known positive:
the training, the validation and the test triples alike.  A filter built from the training and test
splits only (``torch.cat([train, test])``) leaves the validation positives among the corruptions: each one
ranks above the test positive it shares a query with, and filtered MRR and hits@k read far below the
model's (pykeen/pykeen#397: MRR 0.664 against 0.802).

Proven from the code: a concatenation (``torch.cat``, ``np.concatenate``, ``np.vstack``, ``+`` of lists, ``|`` of
sets) of a training split and a test split, with no validation split among its parts, while the file has a
validation split named like the test part (``test`` -> ``val``/``valid``/``validation``/``dev``); and what it
is bound to reaches, by assignments or by a loop over it that fills a collection, a statement of the same
scope that sets scores to minus infinity (``s[idx] = float("-inf")``, ``masked_fill``, ``index_fill_``), so it
is the ranking's filter.  Anything else (a filter passed to another function, a concatenation used for a
vocabulary) is silent.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted, names_in, tokens
from overt.lint.rules.base import Hit

_TRAIN = frozenset({"train", "training", "trn"})
_TEST = frozenset({"test", "testing"})
_VAL = ("val", "valid", "validation", "dev")
_CONCAT = frozenset({"torch.cat", "torch.concat", "torch.concatenate", "torch.vstack", "torch.row_stack",
                     "np.concatenate", "np.vstack", "np.row_stack", "numpy.concatenate", "numpy.vstack",
                     "pd.concat", "itertools.chain", "chain"})
_FILLERS = frozenset({"setdefault", "add", "append", "update", "extend"})
_MASKERS = frozenset({"masked_fill", "masked_fill_", "index_fill", "index_fill_", "index_put_", "fill_"})


def _parts(node: ast.AST) -> list[ast.AST] | None:
    """The pieces a concatenation joins, or None."""
    if isinstance(node, ast.Call) and dotted(node.func) in _CONCAT:
        if dotted(node.func) in ("itertools.chain", "chain"):
            return list(node.args)
        if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)):
            return list(node.args[0].elts)
        return None
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.BitOr)):
        left = _parts(node.left) if isinstance(node.left, ast.BinOp) else [node.left]
        return None if left is None else left + [node.right]
    return None


def _piece(node: ast.AST) -> str | None:
    """The split a piece names (its dotted name, through ``set()``/``list()``/``.tolist()``), or None."""
    while isinstance(node, ast.Call):
        if dotted(node.func) in ("set", "list", "tuple") and len(node.args) == 1:
            node = node.args[0]
        elif isinstance(node.func, ast.Attribute) and node.func.attr in ("tolist", "numpy", "cpu") and not node.args:
            node = node.func.value
        else:
            return None
    return dotted(node)


def _role(name: str) -> str | None:
    words: set[str] = set()
    for part in name.split("."):
        words |= set(tokens(part))
    roles = {r for r, ws in (("train", _TRAIN), ("test", _TEST), ("val", frozenset(_VAL))) if words & ws}
    return roles.pop() if len(roles) == 1 else None


_RENAMES = (("testing", "validation"), ("testing", "valid"), ("test", "val"), ("test", "valid"),
            ("test", "validation"), ("test", "dev"), ("Test", "Val"), ("Test", "Valid"), ("TEST", "VAL"),
            ("TEST", "VALID"))


def _counterpart(ix: FileIndex, test: str, scope: ast.AST | None) -> str | None:
    """A validation split named like the test part, that the same scope refers to (or takes as a parameter)."""
    seen = {dotted(n) for n in ix.scope_nodes(scope if scope is not None else ix.tree)
            if isinstance(n, (ast.Name, ast.Attribute))}
    seen |= {n.arg for n in ix.scope_nodes(scope if scope is not None else ix.tree) if isinstance(n, ast.arg)}
    for src, dst in _RENAMES:
        if src in test and test.replace(src, dst) in seen:
            return test.replace(src, dst)
    return None


def _is_minus_inf(node: ast.AST) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = node.operand
        if isinstance(inner, ast.Constant) and isinstance(inner.value, (int, float)) and inner.value >= 1e8:
            return True
        return dotted(inner) in ("np.inf", "math.inf", "torch.inf", "numpy.inf", "float('inf')")
    if isinstance(node, ast.Call) and dotted(node.func) == "float" and node.args and \
            isinstance(node.args[0], ast.Constant) and str(node.args[0].value).strip().lower() in ("-inf", "-infinity"):
        return True
    return False


def _mask_statements(ix: FileIndex, scope_nodes: list[ast.AST]) -> list[ast.stmt]:
    out: list[ast.stmt] = []
    for node in scope_nodes:
        if isinstance(node, ast.Assign) and _is_minus_inf(node.value) and \
                any(isinstance(t, ast.Subscript) for t in node.targets):
            out.append(node)
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MASKERS \
                and any(_is_minus_inf(a) for a in list(node.args) + [k.value for k in node.keywords]):
            out.append(ix.statement_of(node))
    return out


def _derived(scope_nodes: list[ast.AST], start: str) -> set[str]:
    """Names whose values come from ``start``: assigned from it, or filled in a loop over it."""
    names = {start}
    for _ in range(4):
        before = len(names)
        for node in scope_nodes:
            if isinstance(node, ast.Assign) and names_in(node.value) & names:
                for t in node.targets:
                    names |= {dotted(e) or "" for e in ast.walk(t) if isinstance(e, ast.Name)} - {""}
            elif isinstance(node, ast.Assign):  # m[known[:, 0], known[:, 1]] = True: a mask of the known ones
                for t in node.targets:
                    if isinstance(t, ast.Subscript) and names_in(t.slice) & names and dotted(t.value):
                        names.add(dotted(t.value) or "")
            elif isinstance(node, (ast.For, ast.comprehension)) and names_in(node.iter) & names:
                body = node.body if isinstance(node, ast.For) else []
                names |= {e.id for e in ast.walk(node.target) if isinstance(e, ast.Name)}
                for stmt in body:
                    for sub in ast.walk(stmt):
                        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and \
                                sub.func.attr in _FILLERS and dotted(sub.func.value):
                            names.add(dotted(sub.func.value) or "")
                        elif isinstance(sub, ast.Assign):
                            for t in sub.targets:
                                if isinstance(t, ast.Subscript) and dotted(t.value):
                                    names.add(dotted(t.value) or "")
        if len(names) == before:
            break
    return names


def filter_misses_split(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a ranking filter of known positives that leaves out a split."""
    for node in ast.walk(ix.tree):
        if not isinstance(node, ast.Assign) or len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
            continue
        parts = _parts(node.value)
        if not parts or len(parts) < 2:
            continue
        names = [_piece(p) for p in parts]
        if any(n is None for n in names):
            continue
        roles = {_role(n or ""): n for n in names}
        if None in roles or "val" in roles or not {"train", "test"} <= set(roles):
            continue
        test = roles["test"] or ""
        scope = ix.enclosing_function(node)
        val = _counterpart(ix, test, scope)
        if val is None:
            continue
        nodes = ix.scope_nodes(scope if scope is not None else ix.tree)
        filt = node.targets[0].id
        derived = _derived(nodes, filt)
        masks = [m for m in _mask_statements(ix, nodes) if names_in(m) & derived and m.lineno > node.lineno]
        if not masks:
            continue
        mask = masks[0]
        joined = ", ".join(n or "" for n in names)
        written = ix.segment(node.value)
        suggest = written.replace(test, f"{val}, {test}", 1) if len(written) < 80 else "train, validation and test"
        yield Hit("disjoint-sets-overlap", node.value,
                  f"`{filt}` joins the known positives of {joined} and filters the ranking with them "
                  f"(`{ix.segment(mask)}`, line {mask.lineno}), but not those of `{val}`: the validation positives "
                  "stay among the candidates each test positive is ranked against, each ranks above the test "
                  "positive of its query, and filtered MRR and hits@k read below the model's",
                  fix=f"filter with every split's known positives: add `{val}` to the concatenation ({suggest})")
