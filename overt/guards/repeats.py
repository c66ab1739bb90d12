"""Guard on containers that hold one module several times (slug ``modules-repeated-in-container``; issue 33,
invariants of correct training).

An invariant of a model's structure: each entry of an ``nn.ModuleList`` or ``nn.Sequential`` is its own
module.  ``nn.ModuleList([Block(d)] * n)`` breaks it (the list repeats one reference): the entries share
one set of weights, compute the same function, and ``parameters()`` lists the shared tensors once.

Seen once per watched model, at its first checked forward (a walk of its module tree, no device work):
a ``ModuleList``/``Sequential`` whose children include one module object with parameters at two or more
positions (a shared ``nn.ReLU()`` has nothing to share: not judged).  Sharing can be meant (ALBERT-style or
universal transformers), and only the code says so; the guard reports a repetition only when the class
that owns the container is the user's code, its source can be read, and neither it nor the line that
built the container speaks of sharing (share, tie, reuse, universal, recurrent, ALBERT: the words
:data:`overt.lint.rules.repeats.INTENT` reads).  A model that is itself the container (``model =
nn.Sequential(*[layer] * n)``) has no owner class to read: lint's rule of the same slug sees it.
The line is named from the owner class's source when lint's rule finds the form there.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from overt.guards.check import Check
from overt.guards.where import class_source, is_user_file, short_location


def repeated_children(container: nn.Module) -> list[tuple[nn.Module, list[str]]]:
    """(module, the keys it is held under) for each module with parameters held at two or more positions."""
    keys: dict[int, list[str]] = {}
    mods: dict[int, nn.Module] = {}
    for key, child in container._modules.items():
        if child is not None:
            keys.setdefault(id(child), []).append(key)
            mods[id(child)] = child
    out = []
    for i, ks in keys.items():
        if len(ks) > 1 and next(mods[i].parameters(), None) is not None:
            out.append((mods[i], ks))
    return out


def _owner_source(owner: nn.Module) -> tuple[str, str, int] | None:
    """(file, source, first line) of the class of ``owner`` when it is the user's code."""
    found = class_source(owner)
    if found is None or not is_user_file(found[0]):
        return None
    path, lines, first = found
    return path, "".join(lines), first


def _built_at(path: str, cls_name: str, attr: str) -> tuple[int, bool] | None:
    """(line, meant) of the repetition lint's rule finds in ``path`` for ``self.<attr>`` of class ``cls_name``."""
    import ast

    from overt.lint.index import FileIndex
    from overt.lint.rules.repeats import INTENT, repeated_containers

    try:
        with open(path, encoding="utf-8") as f:
            source = f.read()
        ix = FileIndex.build(ast.parse(source), source)
    except (OSError, SyntaxError, ValueError, UnicodeDecodeError):
        return None
    for rep in repeated_containers(ix):
        cls = ix.enclosing_class(rep.node)
        if rep.target == attr and (cls is None or cls.name == cls_name):
            return rep.node.lineno, False
    # the container is built somewhere lint's rule did not see a form (a helper of another file): read the
    # assignment's own line for words of intent
    for node in ast.walk(ix.tree):
        if isinstance(node, ast.Assign) and any(getattr(t, "attr", None) == attr for t in node.targets):
            cls = ix.enclosing_class(node)
            if cls is not None and cls.name == cls_name:
                return node.lineno, bool(INTENT.search(ix.segment(node)))
    return None


class RepeatChecks(Check):
    name = "repeats"

    def __init__(self, session: Any):
        super().__init__(session)
        self.seen: set[int] = set()  # id of the models walked

    def on_checked_forward(self, info: Any, args: tuple, light: bool) -> None:
        module = info.module
        if id(module) in self.seen:
            return
        self.seen.add(id(module))
        for name, container in module.named_modules():
            if not name or not isinstance(container, (nn.ModuleList, nn.Sequential)):
                continue  # the root itself: no owner class to read
            repeated = repeated_children(container)
            if repeated:
                self._judge(module, name, container, repeated, info.name)

    def _judge(self, root: nn.Module, name: str, container: nn.Module, repeated: list, root_name: str) -> None:
        from overt.lint.rules.repeats import INTENT

        prefix, _, attr = name.rpartition(".")
        owner = root.get_submodule(prefix) if prefix else root
        if isinstance(owner, (nn.ModuleList, nn.Sequential)):
            return  # a container inside a container: the class that built it is further up
        found = _owner_source(owner)
        if found is None:
            return
        path, source, first = found
        if INTENT.search(source):
            return  # the class speaks of sharing: it may be meant
        built = _built_at(path, type(owner).__name__, attr)
        if built is not None and built[1]:
            return
        line = short_location(path, built[0] if built else first)
        module, keys = max(repeated, key=lambda r: len(r[1]))
        n_params = sum(p.numel() for p in module.parameters())
        kind = type(container).__name__
        total = len(container._modules)
        where = f"self.{attr} of {type(owner).__name__} ({kind}) {'built' if built else 'in the class'} at {line}"
        self.s.report(
            "modules-repeated-in-container",
            f"the {kind} {root_name}.{name} holds one "
            f"{type(module).__name__} object ({n_params:,} parameters) at {len(keys)} of its {total} positions "
            f"({', '.join(keys[:6])}{', ...' if len(keys) > 6 else ''}): those entries are one module, so they share "
            "their weights and compute the same function, and parameters() lists the shared tensors once -- the "
            f"optimizer trains one layer where {len(keys)} were meant. A list multiplied by a count ([Block(d)] * n) "
            "repeats the reference, not the constructor.",
            fix=f"build one module per entry: nn.{kind}({'*' if kind == 'Sequential' else ''}[Block(d) for _ in "
            "range(n)]) (copy.deepcopy(block) for "
            "copies of one prototype); if the sharing is meant, say so in the class (a comment on weight sharing)",
            where=where, key=f"{id(container)}")
