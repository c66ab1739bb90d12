"""A re-identification ranking that reads the camera ids and never uses them (part of OVT542
``disjoint-sets-overlap``).

The re-identification protocols (Market-1501, DukeMTMC, MSMT17, VeRi, CUHK03) rank, for each query, a
gallery from which the images of the query's identity taken by the query's own camera are removed: they are
near-duplicates of the query (same view, same moment), not a re-identification.  Kept, they are the first
match of almost every query and rank-1 and mAP are inflated (SiddhantKapil/LA-Transformer#3, [w207]).

Proven from the code: one scope ranks (``argsort``, ``topk``, ``sort``) and compares identities of the ranked
gallery with the query's (``g_pids[order] == q_pid``), and it holds camera ids (parameters or names bound
there, named ``camid``, ``cam``, ``camera`` ..., not constants) that it reads only to bind other camera ids:
no comparison, mask, call or index takes them, so nothing removes the query's own-camera matches.
Anything that uses them (``g_camids[order] != q_camid``, passing them to a helper) is taken as the removal.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, names_in, tokens
from overt.lint.rules.base import Hit

_CAM = frozenset({"cam", "cams", "camid", "camids", "camera", "cameras"})
_CAM_EXTRA = frozenset({"q", "g", "query", "queries", "gallery", "test", "val", "id", "ids", "all", "list", "s"})
_IDS = frozenset({"pid", "pids", "person", "identity", "identities", "ident", "id", "ids", "label", "labels"})
_RANK = frozenset({"argsort", "topk", "sort", "argpartition"})


def _is_cam(name: str) -> bool:
    if name.isupper():
        return False  # a constant: the number of cameras
    words = set(tokens(name))
    return bool(words & _CAM) and words <= _CAM | _CAM_EXTRA


def _bound(nodes: list[ast.AST]) -> dict[str, list[ast.AST | None]]:
    out: dict[str, list[ast.AST | None]] = {}
    for node in nodes:
        if isinstance(node, ast.Assign):
            for t in node.targets:
                if isinstance(t, ast.Name):
                    out.setdefault(t.id, []).append(node.value)
                elif isinstance(t, (ast.Tuple, ast.List)):
                    values = node.value.elts if isinstance(node.value, (ast.Tuple, ast.List)) and \
                        len(node.value.elts) == len(t.elts) else [None] * len(t.elts)
                    for e, v in zip(t.elts, values):
                        if isinstance(e, ast.Name):
                            out.setdefault(e.id, []).append(v)
        elif isinstance(node, ast.arg):
            out.setdefault(node.arg, []).append(None)
    return out


def _only_rebinds(ix: FileIndex, use: ast.Name, cams: set[str]) -> bool:
    """``use`` only serves to bind another camera id (``q_cam = cams[query[i]]``)."""
    stmt = ix.statement_of(use)
    if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
        return False
    target = stmt.targets[0]
    if isinstance(target, ast.Name):
        return target.id in cams
    if isinstance(target, (ast.Tuple, ast.List)) and isinstance(stmt.value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(stmt.value.elts):
        for e, v in zip(target.elts, stmt.value.elts):
            if any(sub is use for sub in ast.walk(v)):
                return isinstance(e, ast.Name) and e.id in cams
    return False


def _ranked_names(nodes: list[ast.AST]) -> set[str]:
    ranked: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.Assign) and any(isinstance(s, ast.Call) and isinstance(s.func, ast.Attribute)
                                                and s.func.attr in _RANK for s in ast.walk(node.value)):
            ranked |= {e.id for t in node.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
    for _ in range(3):
        for node in nodes:
            if isinstance(node, ast.Assign) and names_in(node.value) & ranked:
                ranked |= {e.id for t in node.targets for e in ast.walk(t) if isinstance(e, ast.Name)}
    return ranked


def _identity_match(nodes: list[ast.AST], ranked: set[str]) -> ast.Compare | None:
    for node in nodes:
        if not isinstance(node, ast.Compare) or not any(isinstance(op, ast.Eq) for op in node.ops):
            continue
        sides = [node.left] + node.comparators
        named = [any(isinstance(s, ast.Name) and set(tokens(s.id)) & _IDS for s in ast.walk(side)) for side in sides]
        if all(named) and any(names_in(side) & ranked for side in sides):
            return node
    return None


def camera_ids_unused(ix: FileIndex) -> Iterator[Hit]:
    """Hits of ``disjoint-sets-overlap`` for a re-id ranking that keeps the query's own-camera matches."""
    scopes: list[ast.AST] = [ix.tree] + [f for fs in ix.functions.values() for f in fs]
    for scope in scopes:
        nodes = ix.scope_nodes(scope)
        ranked = _ranked_names(nodes)
        if not ranked:
            continue
        match = _identity_match(nodes, ranked)
        if match is None:
            continue
        bound = _bound(nodes)
        cams = {n for n, values in bound.items() if _is_cam(n)
                and not any(isinstance(v, ast.Constant) for v in values)}
        if not cams:
            continue
        uses = [n for n in nodes if isinstance(n, ast.Name) and n.id in cams and isinstance(n.ctx, ast.Load)]
        if any(not _only_rebinds(ix, u, cams) for u in uses):
            continue
        names = ", ".join(f"`{c}`" for c in sorted(cams))
        yield Hit("disjoint-sets-overlap", match,
                  f"`{ix.segment(match)}` scores the ranked gallery by identity, and this scope holds the camera "
                  f"ids {names} but never compares them: the gallery images of the query's identity taken by the "
                  "query's own camera stay among the candidates; the re-identification protocols remove them "
                  "(near-duplicates of the query), and kept they are the first match of almost every query, so "
                  "rank-1 and mAP are inflated",
                  fix="before scoring each query, drop the gallery entries with the query's identity and camera: "
                      "keep = ~((g_pids[order] == q_pid) & (g_camids[order] == q_camid)), then score "
                      "g_pids[order][keep]")
