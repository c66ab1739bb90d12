"""Lint one source text or one file: parse once, run the selected rules, apply silencing."""

from __future__ import annotations

import ast
import gc
import io
import sys
import tokenize
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from overt.catalog import Severity
from overt.findings import Finding
from overt.lint.analysis.project import Project
from overt.lint.index import FileIndex
from overt.lint.notebook import NotebookSource, read_notebook
from overt.lint.rules import RULES, Hit
from overt.lint.severity import level_of
from overt.lint.suppress import Suppressions


@dataclass
class FileResult:
    """What lint found in one file. ``error`` is set (and ``findings`` empty)
    when the file could not be read or parsed."""

    path: str
    findings: list[Finding] = field(default_factory=list)
    hits: list[Hit] = field(default_factory=list)
    error: str | None = None
    notebook: NotebookSource | None = None
    error_at: tuple[int, int] | None = None  # (line, col) of a syntax error
    #: notebook cells (or a whole notebook) lint could not parse and skipped: "path:cell N:line:col: why"
    skipped: list[str] = field(default_factory=list)


@contextmanager
def cyclic_gc_paused():
    """Pause Python's cyclic garbage collector for a lint run.  Lint's data is acyclic
    (syntax trees, dicts of nodes); the one cycle a file makes (its index and the analyses
    cached on it) is broken by :func:`lint_source` when the file is done, so the collector
    would only spend time re-scanning live trees."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


#: deep-learning frameworks other than PyTorch: a module that imports one of them and not torch is not
#: PyTorch code (d2l's mxnet.py, a TensorFlow port), and PyTorch's rules do not apply to it
OTHER_FRAMEWORKS = frozenset({"mxnet", "tensorflow", "jax", "flax", "paddle", "keras", "mindspore", "oneflow",
                              "mlx", "chainer", "theano"})
_TORCH_TOPS = frozenset({"torch", "torchvision", "torchaudio", "lightning", "pytorch_lightning", "timm"})


def other_framework(ix: FileIndex) -> bool:
    """Does the module import another framework (mxnet, tensorflow, jax...) and nothing of torch's?"""
    tops = {(module or "").split(".")[0] for module, level, _ in ix.imports.values() if level == 0}
    return bool(tops & OTHER_FRAMEWORKS) and not tops & _TORCH_TOPS


def lint_source(source: str, path: str = "<string>", select: set[str] | None = None,
                file: Path | None = None, project: Project | None = None) -> list[Hit]:
    """Run the rules in ``select`` (default: all) over ``source``; raise SyntaxError when it does not parse.

    ``file`` and ``project``: where the source lives and the run's project index, so that
    imports of other modules of the package are followed.
    Returned hits are silenced per line/file, de-duplicated and sorted by position.
    """
    ix = project.known(file, source) if project is not None and file is not None else None
    kept = ix is not None  # an imported module the project keeps for the rest of the run
    if ix is None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", SyntaxWarning)
            tree = ast.parse(source, filename=path)
        ix = FileIndex.build(tree, source, path=file, project=project)
    if other_framework(ix):
        if not kept:
            ix.cache.clear()
        return []
    sup = Suppressions.parse(ix.source_lines)
    hits: list[Hit] = []
    seen: set[tuple[str, int, int]] = set()
    for slug, check in RULES.items():
        if select is not None and slug not in select:
            continue
        try:
            found = list(check(ix))
        except Exception as exc:  # a rule bug must not take the whole run down
            print(f"overt lint: internal error in rule {slug} on {path}: {type(exc).__name__}: {exc} "
                  f"(skipped; please report it)", file=sys.stderr)
            continue
        for hit in found:
            key = (hit.slug, hit.line, hit.col)
            if key in seen or sup.silenced(hit.slug, hit.line):
                continue
            seen.add(key)
            hits.append(hit)
    hits.sort(key=lambda h: (h.line, h.col, h.slug))
    if not kept:
        ix.cache.clear()  # frees the analyses now (they refer back to the index) instead of at the next GC
    return hits


def _finding(hit: Hit, path: str, nb: NotebookSource | None) -> Finding:
    line, details = hit.line, {}
    where = f"{path}:{hit.line}:{hit.col}"
    if nb is not None:
        cell, line = nb.locate(hit.line)
        details["cell"] = cell
        where = f"{path}:cell {cell}:{line}:{hit.col}"
    if hit.fix_note and nb is None:  # --fix does not rewrite notebooks
        details["fix"] = hit.fix_note
    return Finding(hit.slug, hit.text, where=where, path=path, line=line, col=hit.col, details=details,
                   severity=Severity(level_of(hit.slug, hit.severity)), fix=hit.fix, why=hit.why)


def read_source(path: Path) -> str:
    """The file's text, decoded as Python does (PEP 263 coding cookie, UTF-8 BOM)."""
    raw = path.read_bytes()
    if path.suffix == ".ipynb":
        return raw.decode("utf-8")
    encoding, _ = tokenize.detect_encoding(io.BytesIO(raw).readline)
    return raw.decode(encoding)


def _parseable_cells(nb: NotebookSource, shown: str, skipped: list[str]) -> NotebookSource:
    """``nb`` without the code cells that are not valid Python (each named in ``skipped``): a notebook is
    a scratchpad whose cells run one by one, so one broken cell must not hide the others' findings."""
    for _ in range(len(nb.where) + 1):
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", SyntaxWarning)
                ast.parse(nb.source)
            return nb
        except SyntaxError as exc:
            cell, line = nb.locate(exc.lineno or 1)
            if cell == 0:
                return nb  # not inside a cell: let the caller report it
            skipped.append(f"{shown}:cell {cell}:{line}:{exc.offset or 1}: cell skipped: cannot parse: {exc.msg}")
            nb = nb.without_cell(cell)
        except (RecursionError, ValueError):
            return nb
    return nb


def lint_file(path: Path, select: set[str] | None = None, project: Project | None = None) -> FileResult:
    """Lint a .py or .ipynb file; unreadable or unparseable files come back with ``error``.
    With ``project`` (one per run), imports of the package's other modules are followed."""
    shown = path.as_posix()
    result = FileResult(shown)
    try:
        text = read_source(path)
    except (OSError, UnicodeDecodeError, SyntaxError) as exc:
        result.error = f"{shown}: cannot read: {getattr(exc, 'strerror', None) or exc}"
        return result
    nb = None
    if path.suffix == ".ipynb":
        try:
            nb = read_notebook(text)
        except ValueError as exc:
            result.skipped.append(f"{shown}: {exc}; notebook skipped")
            return result
        nb = _parseable_cells(nb, shown, result.skipped)
        text = nb.source
        result.notebook = nb
    try:
        result.hits = lint_source(text, shown, select, path if nb is None else None, project)
    except RecursionError:
        result.error = f"{shown}: cannot parse: nested too deeply for Python's parser"
        return result
    except (SyntaxError, ValueError) as exc:
        line = getattr(exc, "lineno", None) or 1
        col = getattr(exc, "offset", None) or 1
        loc = f"{shown}:{line}:{col}"
        if nb is not None:
            cell, cl = nb.locate(line)
            loc = f"{shown}:cell {cell}:{cl}:{col}"
        msg = getattr(exc, "msg", None) or str(exc)
        result.error_at = (line, col)
        result.error = f"{loc}: cannot parse: {msg} (lint needs valid Python; fix the syntax error first)"
        return result
    result.findings = [_finding(h, shown, nb) for h in result.hits]
    return result
