"""Built-in recipe ``house-prices``: regression on a CSV of house features and a price column.

Point ``csv=`` at a file with a header row; ``target=`` names the column to
predict and ``features=`` the input columns (default: every other column).
Every value must be numeric.  Rows are split with a fixed seed; features and
target are standardised with the mean and standard deviation of the training
split only (no validation statistics leak into training), and the metrics are
reported in the target's own units: ``val/mse``, ``val/mae`` and ``val/r2``
(R-squared against the validation set's own variance).

No data set ships with this recipe.  For a try-out, ``csv=synthetic`` trains on 1,000 generated
rows (size, bedrooms, age, distance to the centre -> price, with noise), or write them to a file::

    overt train house-prices csv=synthetic                   # generated rows, no file
    python -m overt.recipes.house_prices houses.csv          # the same 1,000 rows as a CSV
    overt train house-prices csv=houses.csv target=price
    overt predict runs/house-prices-... new_houses.csv        # same columns, target optional
"""

from __future__ import annotations

import csv as csv_module
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import TensorDataset

import overt
from overt.errors import ConfigError, DataError
from overt.preprocessing import Preprocessing
from overt.recipes.common import numeric_rows, require_file, split_order

defaults = {
    "epochs": 30,
    "batch_size": 32,
    "monitor": "val/r2",
    "monitor_mode": "max",
    "csv": "",
    "target": "price",
    "features": [],
    "val_fraction": 0.2,
    "split_seed": 0,
    "hidden": [64, 32],
    "lr": 3e-3,
    "weight_decay": 1e-4,
}

SYNTHETIC_COLUMNS = ["size_sqft", "bedrooms", "age_years", "distance_km", "price"]
#: ``csv=synthetic``: train on :func:`synthetic_rows` (1,000 rows, seed 0) instead of a file
SYNTHETIC = "synthetic"


def synthetic_rows(rows: int = 1000, seed: int = 0) -> list[list[str]]:
    """Synthetic house-price rows (as a CSV holds them, header excluded): price (in $1000s) grows with
    size and bedrooms, falls with age and distance, with a diminishing return on size and
    multiplicative noise."""
    gen = torch.Generator().manual_seed(seed)
    size = 500 + 3000 * torch.rand(rows, generator=gen)
    bedrooms = torch.clamp((size / 600).round() + torch.randint(-1, 2, (rows,), generator=gen), 1, 6)
    age = 80 * torch.rand(rows, generator=gen)
    distance = 30 * torch.rand(rows, generator=gen) ** 1.5
    price = (40 + 0.18 * size - 1.2e-5 * size ** 2 + 12 * bedrooms - 0.9 * age - 4.0 * distance)
    price = price * (1 + 0.05 * torch.randn(rows, generator=gen))
    return [[f"{row[0]:.0f}", f"{row[1]:.0f}", f"{row[2]:.1f}", f"{row[3]:.2f}", f"{row[4]:.2f}"]
            for row in zip(size.tolist(), bedrooms.tolist(), age.tolist(), distance.tolist(), price.tolist())]


def write_synthetic_csv(path: str | Path, rows: int = 1000, seed: int = 0) -> Path:
    """A synthetic house-price CSV (:func:`synthetic_rows`) with its header."""
    path = Path(path)
    with path.open("w", newline="") as fh:
        writer = csv_module.writer(fh)
        writer.writerow(SYNTHETIC_COLUMNS)
        writer.writerows(synthetic_rows(rows, seed))
    return path


def read_table(path: str | Path) -> tuple[list[str], list[dict[str, str]]]:
    """Header and rows (dicts) of a CSV file."""
    with Path(path).open(newline="") as fh:
        reader = csv_module.DictReader(fh)
        rows = list(reader)
        return list(reader.fieldnames or []), rows


class HousePriceNet(nn.Module):
    """An MLP: Linear-ReLU per hidden width, then one output (the standardised price)."""

    def __init__(self, n_features: int, hidden: list[int]):
        super().__init__()
        layers: list[nn.Module] = []
        width = n_features
        for h in hidden:
            layers += [nn.Linear(width, h), nn.ReLU()]
            width = h
        layers.append(nn.Linear(width, 1))
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net(x).squeeze(-1)


def build_model(cfg: Any, meta: dict[str, Any]) -> nn.Module:
    return HousePriceNet(len(meta["features"]), list(cfg.hidden))


def _columns(cfg: Any, header: list[str]) -> list[str]:
    if cfg.target not in header:
        raise ConfigError(f"target column {cfg.target!r} is not in {cfg.csv}", where=f"columns: {', '.join(header)}",
                          fix="set target= to one of the columns")
    features = list(cfg.features) or [c for c in header if c != cfg.target]
    unknown = [c for c in features if c not in header]
    if unknown:
        raise ConfigError(f"feature column(s) {', '.join(unknown)} not in {cfg.csv}",
                          where=f"columns: {', '.join(header)}", fix="set features= to columns of the file")
    return features


def build(cfg: Any) -> overt.Recipe:
    if not cfg.csv:
        raise ConfigError("house-prices needs a CSV file: csv= is empty",
                          fix="run `overt train house-prices csv=houses.csv target=price`; to try it on synthetic "
                              "data first: `overt train house-prices csv=synthetic` (or write the file with "
                              "`python -m overt.recipes.house_prices houses.csv`)")
    if cfg.csv == SYNTHETIC:
        header = SYNTHETIC_COLUMNS
        rows = [dict(zip(header, row)) for row in synthetic_rows()]
        print(f"house-prices: csv=synthetic: {len(rows):,} generated rows ({', '.join(header)}), not real data; "
              "`python -m overt.recipes.house_prices houses.csv` writes the same rows to a file", file=sys.stderr)
    else:
        header, rows = read_table(require_file(cfg.csv, what="house-price CSV", setting="csv",
                                               get_it="your own data (or csv=synthetic for generated rows)"))
    features = _columns(cfg, header)
    x = numeric_rows(rows, features)
    y = numeric_rows(rows, [cfg.target])[:, 0]
    train_idx, val_idx = split_order(len(rows), cfg.val_fraction, cfg.split_seed)
    x_mean, x_std = x[train_idx].mean(0), x[train_idx].std(0).clamp(min=1e-8)
    y_mean, y_std = float(y[train_idx].mean()), float(y[train_idx].std())
    prep = Preprocessing(features=features, shift=x_mean.tolist(), scale=x_std.tolist(), task="regression",
                         target={"name": cfg.target, "shift": y_mean, "scale": y_std})
    xs, ys = prep.tensor(rows), (y - y_mean) / y_std
    y_val_var = float(y[val_idx].var(unbiased=False)) / y_std ** 2  # in standardised units
    meta = {"features": features, "target": cfg.target, "x_mean": x_mean.tolist(), "x_std": x_std.tolist(),
            "y_mean": y_mean, "y_std": y_std}
    model = build_model(cfg, meta)
    return overt.Recipe(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay),
        loss_fn=nn.MSELoss(),
        train_data=TensorDataset(xs[train_idx], ys[train_idx]),
        val_data=TensorDataset(xs[val_idx], ys[val_idx]),
        metrics={
            "mse": lambda out, t: ((out - t) ** 2).mean() * y_std ** 2,
            "mae": lambda out, t: (out - t).abs().mean() * y_std,
            # sample-weighted over batches this is exactly 1 - SSE / SST of the validation set
            "r2": lambda out, t: 1 - ((out - t) ** 2).mean() / max(y_val_var, 1e-12),
        },
        meta=meta,
        preprocessing=prep,
        raw_val=[rows[i] for i in val_idx.tolist()],
    )


if __name__ == "__main__":  # python -m overt.recipes.house_prices OUT.csv [ROWS] [SEED]
    if len(sys.argv) < 2:
        sys.exit("usage: python -m overt.recipes.house_prices OUT.csv [ROWS] [SEED]")
    out = write_synthetic_csv(sys.argv[1], *(int(a) for a in sys.argv[2:4]))
    print(f"wrote {out}")
