"""The grid of ``overt sweep``: read from the overrides, counted, and checked as a whole before any
run trains.

:func:`grid` splits the overrides into fixed ones and swept axes, counts the combinations before
making any (a grid over :data:`MAX_RUNS` is refused) and refuses a key given twice or a value listed
twice.  :func:`plan` resolves every combination's config (a misspelt key or a bad value fails
here), refuses two combinations that make the same run (``lr=0.1,1e-1``) and the keys a sweep
sets itself, and gives each run a folder name of its own (:func:`folder_names`).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
from dataclasses import dataclass
from typing import Any

from overt.errors import ConfigError

#: the most runs one sweep trains; a larger grid is refused before anything runs
MAX_RUNS = 10_000
#: keys whose value the sweep sets for each run (its folder)
SET_BY_SWEEP = ("run_dir", "name")
_FOLDER_MAX = 120


def split_values(raw: str) -> list[str]:
    """``"a,b"`` -> ``["a", "b"]``; a bracketed or quoted value stays whole."""
    text = raw.strip()
    if text[:1] in "[{'\"" or "," not in text:
        return [text]
    return [v.strip() for v in text.split(",") if v.strip()]


def grid(overrides: list[str]) -> tuple[list[str], list[dict[str, str]]]:
    """(fixed overrides, one dict of swept key -> value per combination, in grid order).  Raises
    :class:`ConfigError` for an unreadable override, a key given twice, a value listed twice for one
    key, or a grid of more than :data:`MAX_RUNS` combinations (counted before any is made)."""
    fixed: list[str] = []
    axes: dict[str, list[str]] = {}
    seen: set[str] = set()
    for item in overrides:
        key, sep, raw = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise ConfigError(f"cannot read the override {item!r}", why="overrides are key=value pairs",
                              fix="write it as key=value, or key=a,b,c to sweep over a, b and c")
        if key in seen:
            raise ConfigError(f"{key} is given twice ({item!r} and an earlier {key}=...)",
                              why="one of the two values would silently win",
                              fix=f"give {key} once: {key}=a,b,c sweeps over several values")
        seen.add(key)
        values = split_values(raw)
        if len(values) > 1:
            repeated = sorted({v for v in values if values.count(v) > 1})
            if repeated:
                raise ConfigError(f"{key} lists {', '.join(f'{key}={v}' for v in repeated)} twice",
                                  why="the same run would be trained twice into one folder",
                                  fix=f"list each value of {key} once")
            axes[key] = values
        else:
            fixed.append(f"{key}={raw}")
    count = math.prod(len(v) for v in axes.values())
    if count > MAX_RUNS:
        sizes = " x ".join(f"{len(v)} ({k})" for k, v in axes.items())
        raise ConfigError(f"the grid has {count:,} runs ({sizes}); a sweep trains at most {MAX_RUNS:,}",
                          why="every combination is trained one after the other: this sweep would never end",
                          fix="sweep fewer values (or fewer keys) at once, e.g. a coarse grid first, then a finer "
                              "one around its best run")
    combos = [dict(zip(axes, values)) for values in itertools.product(*axes.values())] if axes else [{}]
    return fixed, combos


def label(combo: dict[str, str]) -> str:
    """``key=value,key=value`` (``defaults`` for a sweep of one run)."""
    return ",".join(f"{k}={v}" for k, v in combo.items()) or "defaults"


def folder_names(combos: list[dict[str, str]]) -> list[str]:
    """One folder name per combination, distinct even on a case-insensitive file system: the label
    where it is a plain, short name; else its safe part plus a hash of the whole label."""
    labels = [label(c) for c in combos]
    safe = ["".join(c if c.isalnum() or c in "=,.-_" else "_" for c in text) for text in labels]
    names = [s if s == text and len(s) <= _FOLDER_MAX else f"{s[:_FOLDER_MAX]}-{_digest(text)}"
             for s, text in zip(safe, labels)]
    folded = [n.casefold() for n in names]
    return [n if folded.count(n.casefold()) == 1 else f"{n[:_FOLDER_MAX]}-{_digest(text)}"
            for n, text in zip(names, labels)]


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


@dataclass
class PlannedRun:
    """One run of the sweep: its swept values, folder name, recipe module and validated config."""

    overrides: dict[str, str]
    folder: str
    module: Any
    config: Any

    @property
    def label(self) -> str:
        return label(self.overrides)


@dataclass
class Plan:
    """Every run of a sweep, checked.  ``key`` identifies the sweep: the same command on the same
    recipe code gives the same key; ``grid_key`` leaves the recipe's source out."""

    target: str | None
    runs: list[PlannedRun]
    key: str
    grid_key: str

    @property
    def first(self) -> Any:
        return self.runs[0].config

    def stem(self) -> str:
        """The recipe's short name, for the sweep's folder name."""
        from pathlib import Path

        recipe = str(self.first.recipe)
        return Path(recipe).stem if recipe.endswith((".py", ".yaml", ".yml")) else recipe.rsplit(".", 1)[-1]


def plan(target: str | None, overrides: list[str]) -> Plan:
    """Read, count and check the whole grid, then resolve every combination's config: every error a
    run's config could give is raised here, before the first run trains."""
    from overt.cli.train import resolve_run_config

    fixed, combos = grid(overrides)
    set_here = [k for k in SET_BY_SWEEP if any(o.partition("=")[0].strip() == k for o in fixed) or k in combos[0]]
    if set_here:
        raise ConfigError(f"{' and '.join(set_here)} cannot be given to a sweep",
                          why="each run's folder is SWEEP_DIR/<its overrides>",
                          fix="leave it out; sweep_dir=PATH chooses the sweep's folder")
    runs = []
    modules: dict[str, Any] = {}  # each recipe imported once
    for combo, folder in zip(combos, folder_names(combos)):
        module, cfg = resolve_run_config(target, [*fixed, *[f"{k}={v}" for k, v in combo.items()]], modules)
        runs.append(PlannedRun(dict(combo), folder, module, cfg))
    seen: dict[str, PlannedRun] = {}
    for run in runs:
        config = _identity(run.config)
        if config in seen:
            raise ConfigError(f"{seen[config].label} and {run.label} give the same run (the same resolved config)",
                              why="it would be trained twice and ranked against itself",
                              fix="list each value once (0.1 and 1e-1 are one number)")
        seen[config] = run
    from overt.recipes.base import recipe_source

    grid_key = hashlib.sha256(json.dumps([[r.overrides, _identity(r.config)] for r in runs]).encode()).hexdigest()
    sources = sorted({(str(r.config.recipe), str(recipe_source(str(r.config.recipe))["sha256"])) for r in runs})
    key = hashlib.sha256(json.dumps([grid_key, sources]).encode()).hexdigest()
    return Plan(target, runs, key, grid_key)


def _identity(cfg: Any) -> str:
    """A config as canonical JSON, without the keys the sweep sets."""
    data = {k: v for k, v in cfg.model_dump(mode="json").items() if k not in SET_BY_SWEEP}
    return json.dumps(data, sort_keys=True, default=str)
