"""Evaluation inputs normalised otherwise than training inputs (OVT610 ``train-serve-skew``, lint face;
issue 33: normalisation statistics).

The inputs a model is evaluated on must be prepared as the inputs it was trained on.  Two image
pipelines written side by side drift apart silently: the evaluation one without the training one's
``Normalize`` (JeasunLok/ResNet-pytorch#1; w50), or with other statistics (ImageNet's for training,
``(0.5, 0.5, 0.5)`` for validation; mean and std swapped in one of them).  The model then sees
evaluation inputs on another scale, and its validation metric falls for no reason in the model.

Read from ``Compose([...])`` pipelines bound to names (or dict keys) that say training and evaluation
(``train_transform`` / ``val_transform``, ``{"train": ..., "val": ...}``): reported at the evaluation
pipeline when the training one normalises and it does not, or when both normalise with literal
statistics that differ.  Quiet when either pipeline's role is not in its name, a statistic is not a
literal, or no training pipeline normalises.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator

from overt.lint.index import FileIndex, dotted
from overt.lint.rules.base import Hit, rule


def _groups(ix: FileIndex) -> list[list[tuple[str, str, ast.Call]]]:
    """Groups of pipelines written side by side, each ``(role, name, Compose call)`` with a role its name or
    dict key says: the entries of one dict literal; the pipelines bound to names of one scope."""
    out = []
    named: dict[int, list[tuple[str, str, ast.Call]]] = {}
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and _is_compose(ix, node.value):
            name = dotted(node.targets[0]) or ""
            role = ix.loader_role(name)
            if role:
                scope = ix.enclosing_function(node) or ix.tree
                named.setdefault(id(scope), []).append((role, name, node.value))
        elif isinstance(node, ast.Dict):
            group = []
            for k, v in zip(node.keys, node.values):
                if isinstance(k, ast.Constant) and isinstance(k.value, str) and _is_compose(ix, v):
                    role = ix.loader_role(k.value)
                    if role:
                        group.append((role, repr(k.value), v))
            out.append(group)
    return out + list(named.values())


def _is_compose(ix: FileIndex, node: ast.AST | None) -> bool:
    return isinstance(node, ast.Call) and (ix.qualname(node.func) or dotted(node.func) or "").endswith("Compose") \
        and bool(node.args) and isinstance(node.args[0], (ast.List, ast.Tuple))


def _literal(ix: FileIndex, node: ast.AST | None) -> tuple[float, ...] | None:
    if isinstance(node, ast.Name) and len(ix.assigns.get(node.id, [])) == 1:
        node = ix.assigns[node.id][0]
    if isinstance(node, (ast.Tuple, ast.List)):
        vals = []
        for e in node.elts:
            if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) and not isinstance(e.value, bool):
                vals.append(float(e.value))
            else:
                return None
        return tuple(vals)
    return None


def _normalize(ix: FileIndex, compose: ast.Call) -> tuple[ast.Call, object] | None:
    """The pipeline's ``Normalize`` call and its statistics (``(mean, std)``, or None when not literal)."""
    for e in compose.args[0].elts:
        if isinstance(e, ast.Name) and len(ix.assigns.get(e.id, [])) == 1:
            e = ix.assigns[e.id][0]  # normalize = T.Normalize(...), shared by the pipelines
        if isinstance(e, ast.Call) and (dotted(e.func) or "").rsplit(".", 1)[-1] == "Normalize":
            mean = next((k.value for k in e.keywords if k.arg == "mean"), e.args[0] if e.args else None)
            std = next((k.value for k in e.keywords if k.arg == "std"), e.args[1] if len(e.args) > 1 else None)
            m, s = _literal(ix, mean), _literal(ix, std)
            return e, ((m, s) if m is not None and s is not None else None)
    return None


@rule("train-serve-skew")
def eval_normalised_otherwise(ix: FileIndex) -> Iterator[Hit]:
    for pipes in _groups(ix):
        yield from _judge(ix, pipes)


def _judge(ix: FileIndex, pipes: list[tuple[str, str, ast.Call]]) -> Iterator[Hit]:
    train = [(n, c, _normalize(ix, c)) for r, n, c in pipes if r == "train"]
    if len(train) != 1 or train[0][2] is None:
        return  # no training pipeline, several, or one that does not normalise
    tname, _, (tcall, tstats) = train[0]
    for role, name, compose in pipes:
        if role != "eval":
            continue
        norm = _normalize(ix, compose)
        if norm is None:
            yield Hit("train-serve-skew", compose,
                      f"the evaluation pipeline {name} has no Normalize, but the training pipeline {tname} normalises "
                      f"(line {tcall.lineno}): the model is evaluated on inputs on another scale than it was trained "
                      f"on, and the validation metric falls for no reason in the model",
                      fix=f"give {name} the same Normalize(mean, std) as {tname} (the training data's statistics)")
            continue
        ecall, estats = norm
        if estats is not None and tstats is not None and estats != tstats:
            swapped = estats == (tstats[1], tstats[0])
            yield Hit("train-serve-skew", ecall,
                      f"the evaluation pipeline {name} normalises with mean {estats[0]} and std {estats[1]}, the "
                      f"training pipeline {tname} with mean {tstats[0]} and std {tstats[1]} (line {tcall.lineno})"
                      + (" (mean and std swapped)" if swapped else "")
                      + ": the model is evaluated on inputs shifted and scaled otherwise than those it was trained on",
                      fix="normalise evaluation inputs with the training statistics (one Normalize object shared by "
                          "both pipelines)")
