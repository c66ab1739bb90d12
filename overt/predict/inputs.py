"""Reading raw inputs for ``overt predict``: CSV rows, ``.npy`` arrays, text lines, or literal strings."""

from __future__ import annotations

import csv
import io
import sys
from pathlib import Path
from typing import Any, Iterable, TextIO

from overt.errors import OvertError

FORMATS = ("csv", "npy", "text")


class InputError(OvertError):
    """Inputs that ``overt predict`` cannot read."""


def format_of(path: str) -> str:
    suffix = Path(path).suffix.lower()
    return "csv" if suffix == ".csv" else "npy" if suffix == ".npy" else "text"


def csv_rows(text: str) -> list[Any]:
    """Rows of a CSV text: dicts when the first row is a header (any non-numeric cell), lists otherwise."""
    rows = [r for r in csv.reader(io.StringIO(text)) if r]
    if not rows:
        return []

    def numeric(cell: str) -> bool:
        try:
            float(cell)
            return True
        except ValueError:
            return False

    if all(numeric(c) for c in rows[0]):
        return rows
    header = [h.strip() for h in rows[0]]
    return [dict(zip(header, r)) for r in rows[1:]]


def npy_rows(path: str) -> list[Any]:
    import numpy as np

    try:
        array = np.load(path, allow_pickle=False)
    except ValueError as exc:
        raise InputError(f"{path} is not a plain numeric .npy array: {exc}",
                         why="object arrays would need unpickling, which overt never does",
                         fix="save a numeric array with numpy.save") from None
    return list(array) if array.ndim > 0 else [array]


def text_lines(text: str) -> list[str]:
    return [line for line in text.split("\n") if line.strip()]


def parse(text: str, fmt: str) -> list[Any]:
    return csv_rows(text) if fmt == "csv" else text_lines(text)


def read_inputs(items: Iterable[str], fmt: str | None = None, stdin: TextIO | None = None) -> list[Any]:
    """Inputs from files (format by extension unless ``fmt``), ``-`` for stdin, or literal strings
    (an argument that is not a file); no items at all reads stdin."""
    items = list(items)
    stdin = stdin or sys.stdin
    if not items:
        items = ["-"]
    out: list[Any] = []
    for item in items:
        if item == "-":
            if fmt == "npy":
                raise InputError("cannot read .npy arrays from stdin", fix="give the .npy file's path")
            out += parse(stdin.read(), fmt or "text")
            continue
        path = Path(item)
        if path.is_file():
            kind = fmt or format_of(item)
            out += npy_rows(item) if kind == "npy" else parse(path.read_text(encoding="utf-8"), kind)
        elif path.suffix.lower() in (".csv", ".npy", ".txt", ".jsonl") or fmt in ("csv", "npy"):
            raise InputError(f"input file {item} does not exist", fix="check the path")
        else:
            out.append(item)  # a literal input, e.g. a sentence
    return out
