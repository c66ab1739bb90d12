"""What a rule is: a function from a :class:`FileIndex` to hits, registered by slug."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from overt.lint.index import FileIndex


@dataclass(frozen=True)
class Edit:
    """Replace the text between (line, col) positions (1-based lines, 0-based cols)."""

    line: int
    col: int
    end_line: int
    end_col: int
    text: str


@dataclass
class Hit:
    """A rule's raw finding before it becomes an :class:`overt.findings.Finding`.

    ``message`` says what was seen and why it matters; ``fix`` what to change (shown after it,
    ``message; fix``, and given to the Finding as its own field).  ``severity`` overrides the
    rule's default level for this one hit (``"info"`` for a use that is only hygiene, say).
    """

    slug: str
    node: ast.AST
    message: str
    edits: list[Edit] = field(default_factory=list)
    fix_note: str = ""  # what --fix rewrites (``before -> after``), for fixable hits
    fix: str = ""  # what to change, stated apart from the message
    severity: str | None = None  # "error" | "warning" | "info"; None: the rule's level
    why: str = ""  # why it matters, when the rule says more than the catalog entry

    @property
    def text(self) -> str:
        """The whole sentence a user reads: what was seen and why; the fix."""
        if not self.fix or self.message.endswith(self.fix):  # a rule that states the fix in both
            return self.message
        return f"{self.message}; {self.fix}"

    @property
    def line(self) -> int:
        return getattr(self.node, "lineno", 1)

    @property
    def col(self) -> int:
        return getattr(self.node, "col_offset", 0) + 1


def decided(hit: Hit, written: str) -> Hit:
    """The one way every rule treats a literal argument that contradicts its premise (``training=True``
    to a functional dropout, ``shuffle=False`` to a training loader, ``weights_only=False`` to
    ``torch.load``): the author wrote the decision out, so the hit is reported at ``info`` level
    (hidden by default, shown with ``--min-severity info``) and says so."""
    hit.severity = "info"
    hit.message = f"{hit.message} ({written} is written out: the author's decision, reported at info level)"
    return hit


Rule = Callable[[FileIndex], Iterable[Hit]]
RULES: dict[str, Rule] = {}
FIXABLE: set[str] = set()


def rule(slug: str, fixable: bool = False) -> Callable[[Rule], Rule]:
    """Register ``func`` as the rule for ``slug`` (one rule per slug)."""

    def deco(func: Rule) -> Rule:
        if slug in RULES:
            raise ValueError(f"two rules registered for {slug}")
        RULES[slug] = func
        if fixable:
            FIXABLE.add(slug)
        return func

    return deco
