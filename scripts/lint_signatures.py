"""Write ``overt/lint/analysis/signatures_data.py``: the parameter lists of library callables.

    python scripts/lint_signatures.py [--check]

Lint never imports torch (docs/lint.md, "speed"), so the signatures that the rule
``argument-in-wrong-slot`` (OVT420) checks calls against are introspected here, once, with
``inspect.signature``, from the installed torch, scikit-learn and torchmetrics, and kept as data.
Covered: the classes of ``torch.nn`` (their constructors, and ``forward`` of the losses), the
functions of ``torch.nn.functional``, the initialisers of ``torch.nn.init``, ``clip_grad_norm_`` and
``clip_grad_value_``, the optimizers of ``torch.optim`` and its schedulers,
``torch.utils.data.DataLoader``, the functions of ``sklearn.metrics``, and torchmetrics' functional
metrics (``torchmetrics.functional``) and metric classes (their ``update``).  A callable whose
signature cannot be read, or that takes ``*args`` before any named parameter, is left out.

``--check`` compares the file with what the installed libraries say and exits 1 on a difference.
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pprint
import sys
from pathlib import Path

OUT = Path(__file__).resolve().parents[1] / "overt" / "lint" / "analysis" / "signatures_data.py"

HEADER = '''"""Parameter lists of library callables, introspected by ``scripts/lint_signatures.py`` (do not edit).

``SIGNATURES[qualified name] = (positional parameters, keyword-only parameters, takes *args)``;
methods drop ``self``; a class's entry is its constructor, ``<class>.forward`` a loss's call and
``<class>.update`` a torchmetrics metric's call.  Generated from: {versions}.
"""

'''

Sig = tuple[tuple[str, ...], tuple[str, ...], bool]


def _sig(func: object, drop_self: bool) -> Sig | None:
    try:
        sig = inspect.signature(func)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    pos: list[str] = []
    kwonly: list[str] = []
    star = False
    for p in sig.parameters.values():
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            pos.append(p.name)
        elif p.kind == p.VAR_POSITIONAL:
            star = True
        elif p.kind == p.KEYWORD_ONLY:
            kwonly.append(p.name)
    if drop_self and pos and pos[0] in ("self", "cls"):
        pos = pos[1:]
    if not pos and not kwonly:
        return None
    return tuple(pos), tuple(kwonly), star


def _public(mod: object) -> list[tuple[str, object]]:
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    out = []
    for n in names:
        obj = getattr(mod, n, None)
        if obj is not None and not n.startswith("_"):
            out.append((n, obj))
    return out


def collect() -> tuple[dict[str, Sig], str]:
    import sklearn
    import sklearn.metrics
    import torch
    import torch.nn
    import torch.nn.functional
    import torch.nn.init
    import torch.nn.utils
    import torch.optim
    import torch.optim.lr_scheduler
    import torch.utils.data

    table: dict[str, Sig] = {}

    def put(key: str, func: object, drop_self: bool) -> None:
        s = _sig(func, drop_self)
        if s is not None:
            table[key] = s

    for name, obj in _public(torch.nn):
        if inspect.isclass(obj) and issubclass(obj, torch.nn.Module):
            put(f"torch.nn.{name}", obj.__init__, True)
            if name.endswith("Loss"):
                put(f"torch.nn.{name}.forward", obj.forward, True)
    for name, obj in _public(torch.nn.functional):
        if inspect.isfunction(obj):
            put(f"torch.nn.functional.{name}", obj, False)
    for name, obj in _public(torch.optim):
        if inspect.isclass(obj) and issubclass(obj, torch.optim.Optimizer) and obj is not torch.optim.Optimizer:
            put(f"torch.optim.{name}", obj.__init__, True)
    for name, obj in _public(torch.optim.lr_scheduler):
        if inspect.isclass(obj) and name[:1].isupper() and obj.__module__.startswith("torch.optim"):
            put(f"torch.optim.lr_scheduler.{name}", obj.__init__, True)
    put("torch.utils.data.DataLoader", torch.utils.data.DataLoader.__init__, True)
    for name, obj in _public(torch.nn.init):
        if inspect.isfunction(obj) and name.endswith("_") and not name.startswith("_"):
            put(f"torch.nn.init.{name}", obj, False)
    for name in ("clip_grad_norm_", "clip_grad_value_"):
        put(f"torch.nn.utils.{name}", getattr(torch.nn.utils, name), False)
    for name, obj in _public(sklearn.metrics):
        if inspect.isfunction(obj):
            put(f"sklearn.metrics.{name}", obj, False)
    versions = f"torch {torch.__version__.split('+')[0]}, scikit-learn {sklearn.__version__}"
    try:
        tm = importlib.import_module("torchmetrics")
        tmf = importlib.import_module("torchmetrics.functional")
    except ImportError:
        return table, versions
    for name, obj in _public(tmf):
        if inspect.isfunction(obj):
            put(f"torchmetrics.functional.{name}", obj, False)
    for name, obj in _public(tm):
        if inspect.isclass(obj) and issubclass(obj, tm.Metric) and getattr(obj, "update", None) not in (
                None, tm.Metric.update):
            put(f"torchmetrics.{name}.update", obj.update, True)
    return table, f"{versions}, torchmetrics {tm.__version__}"


def render(table: dict[str, Sig], versions: str) -> str:
    lines = []
    for key, value in sorted(table.items()):
        prefix = f"    {key!r}: "
        text = pprint.pformat(value, width=max(40, 116 - len(prefix)), compact=True)
        lines.append(prefix + text.replace("\n", "\n" + " " * len(prefix)) + ",")
    return (HEADER.format(versions=versions)
            + "Entry = tuple[tuple[str, ...], tuple[str, ...], bool]\n\n"
            + "SIGNATURES: dict[str, Entry] = {\n" + "\n".join(lines) + "\n}\n")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the installed libraries, write nothing")
    args = ap.parse_args()
    text = render(*collect())
    if args.check:
        same = OUT.read_text() == text
        print("up to date" if same else f"{OUT} differs from the installed libraries: rerun without --check")
        return 0 if same else 1
    OUT.write_text(text)
    print(f"wrote {OUT} ({text.count(chr(10))} lines)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
