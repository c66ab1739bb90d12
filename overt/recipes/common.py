"""Pieces the built-in recipes share: finding data files on disk (never downloading them),
deterministic splits, and turning model outputs into JSON-ready predictions."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

import torch

from overt.errors import DataError


def find_file(folder: str | Path, names: Sequence[str], *, what: str, get_it: str, setting: str) -> Path:
    """The first of ``names`` (each also tried with ``.gz``) that exists in ``folder``.

    Raises :class:`~overt.errors.DataError` naming the folder, the files looked for,
    where to get them and which setting points overt at them."""
    folder = Path(folder)
    for name in names:
        for candidate in (folder / name, folder / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    looked = ", ".join(f"{n}[.gz]" for n in names)
    raise DataError(
        f"{what} not found: no {looked} in {folder.resolve()}",
        why="overt never downloads data at run time",
        fix=f"get them from {get_it} and put them in {folder}, or point {setting}= at the folder that holds them",
    )


def require_file(path: str | Path, *, what: str, get_it: str, setting: str) -> Path:
    """``path`` if it is a file, else a :class:`~overt.errors.DataError` saying where to get it."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{what} not found at {path.resolve()}", why="overt never downloads data at run time",
                        fix=f"get it from {get_it}, or point {setting}= at your copy")
    return path


def text_split(path: str | Path, *, limit_chars: int, val_fraction: float, get_it: str,
               setting: str = "text") -> tuple[Path, str, str]:
    """``(path, training text, validation text)`` of a UTF-8 text file: its first ``limit_chars``
    characters (0: all), the first ``1 - val_fraction`` of them to train, the rest to validate."""
    found = require_file(path, what="text file", get_it=get_it, setting=setting)
    text = found.read_text(encoding="utf-8", errors="replace")
    if limit_chars:
        text = text[:limit_chars]
    n_train = int(len(text) * (1 - val_fraction))
    return found, text[:n_train], text[n_train:]


def split_order(n: int, val_fraction: float, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(train indices, validation indices): a seeded permutation, the first ``val_fraction`` held out."""
    order = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    n_val = int(round(n * val_fraction))
    return order[n_val:], order[:n_val]


def classify(logits: torch.Tensor, labels: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """One ``{"label", "class", "probability"}`` per row of ``logits`` (the arg-max class and its softmax)."""
    probs = torch.softmax(logits.float(), dim=-1)
    best = probs.argmax(dim=-1)
    out = []
    for index, p in zip(best.tolist(), probs.tolist()):
        out.append({"label": labels[index] if labels else index, "class": index, "probability": round(p[index], 6)})
    return out


def numeric_rows(inputs: Sequence[Any], columns: Sequence[str] | None = None) -> torch.Tensor:
    """Rows of numbers (lists, arrays, or dicts keyed by ``columns``) as a float32 matrix."""
    rows = []
    for i, row in enumerate(inputs):
        if isinstance(row, dict):
            if columns is None:
                raise DataError("a row with named columns was given, but this model takes unnamed features",
                                fix="give the rows as plain numbers (a CSV without a header, or a .npy file)")
            missing = [c for c in columns if c not in row]
            if missing:
                raise DataError(f"input row {i} lacks the column(s) {', '.join(missing)}",
                                where=f"row {i}: columns {', '.join(row)}",
                                fix=f"give every row the columns {', '.join(columns)}")
            row = [row[c] for c in columns]
        try:
            rows.append([float(v) for v in (row.tolist() if hasattr(row, "tolist") else row)])
        except (TypeError, ValueError):
            raise DataError(f"input row {i} is not a row of numbers: {row!r}",
                            fix="give numeric rows (CSV or .npy)") from None
    widths = {len(r) for r in rows}
    if len(widths) > 1:
        raise DataError(f"input rows have different lengths: {sorted(widths)}", fix="give rows of equal length")
    return torch.tensor(rows, dtype=torch.float32)
