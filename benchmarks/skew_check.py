"""How often the train-serve-skew check fires on real held-out data (false positives), and how often it
catches planted skew (scaled, shuffled columns, constant rows).

The check depends only on the training data and the declared preprocessing, not on the weights, so no
model is trained: each recipe is built, its record computed from the training split exactly as
``overt train`` does (``overt.compose.inputs_record``), and its raw validation rows are checked.

    python benchmarks/skew_check.py                       # digits (scikit-learn)
    python benchmarks/skew_check.py ../shared/data/mnist-t10k   # + MNIST t10k (8,000 train / 2,000 held out)
"""

from __future__ import annotations

import sys

import numpy as np


def rate(prep, record, rows) -> float:
    from overt.record import check_inputs

    problems = check_inputs(prep(rows), record)
    return len({r for p in problems for r in p["rows"]}) / len(rows)


def measure(name: str, overrides: list[str]) -> None:
    from overt.cli.train import resolve_run_config
    from overt.compose import inputs_record
    from overt.recipes.base import build_recipe

    module, cfg = resolve_run_config(name, overrides)
    recipe = build_recipe(module, cfg)
    record = inputs_record(recipe)
    prep = recipe.preprocessing
    raw = np.asarray(recipe.raw_val, dtype=np.float64).reshape(len(recipe.raw_val), -1)
    rng = np.random.default_rng(0)
    cases = {
        "held-out rows (false positives)": raw,
        "scaled x16": raw * 16,
        "scaled /16": raw / 16,
        "columns shuffled": raw[:, rng.permutation(raw.shape[1])],
        "constant rows": np.full_like(raw, float(np.median(raw[raw > 0]))),
    }
    print(f"{name}: record from {record['sample']['size']} of {record['sample']['of']} training samples; "
          f"{len(raw)} held-out rows")
    for label, rows in cases.items():
        print(f"  {label:34s} flagged {rate(prep, record, rows):7.2%}")


if __name__ == "__main__":
    measure("digits", [])
    if len(sys.argv) > 1:
        measure("mnist", [f"data_dir={sys.argv[1]}"])
