"""A missing-value mask computed on the input table's column order and applied to the encoder's output,
whose columns are reordered (categorical first): the NaNs meant for the categorical columns land in other
columns, wiping valid numerical values and leaving the real gaps filled with a placeholder category --
with no error.

Source: PriorLabs/TabPFN#718 (https://github.com/PriorLabs/TabPFN/issues/718), "process_text_na_dataframe
corrupts data due to column reordering by OrdinalEncoder" (labels: bug, triaged): "The function
process_text_na_dataframe in tabpfn/utils.py calculates the indices of string columns based on the input
DataFrame X. However, it applies the NA mask using these indices to X_encoded, which is the output of a
ColumnTransformer (the ord_encoder). Since ColumnTransformer reorders columns (typically grouping
categorical features first), the indices from the input X do not match the indices in X_encoded. This
results in: Silent Data Corruption: The NA mask is applied to the wrong columns (often overwriting valid
numerical data with NaN)." (first reported as #530; fixed by the merged #788, "Fix bug in ordinal encoder
by using OrderPreservingColumnTransformer").  Here a table of two numerical and two categorical columns
(the categorical ones 30% missing) is preprocessed the same way -- missing categories replaced by a
placeholder, ordinal-encoded with the categorical columns moved first, the placeholder positions set back
to NaN -- then imputed (0 plus a missing indicator) and fed to an MLP.  The buggy step sets
``X_encoded[placeholder_mask] = nan`` with the input's column order; the twin reorders the mask the way the
encoder reordered the columns.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.81, twin 0.9467
"""

REPORT = "N186"
MECHANISM = "na-mask-applied-to-reordered-columns"
SLUGS = ()
METRIC = ("test_accuracy", 0.81, 0.9467)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
NA = "__NA__"
N = 3000
num_a = rng.normal(size=N)
num_c = rng.normal(size=N)
cat_b = rng.choice(["red", "green", "blue"], size=N).astype(object)
cat_d = rng.choice(["x", "y", "z", "w"], size=N).astype(object)
label = (num_c + 0.8 * np.isin(cat_d, ["x", "y"]) - 0.4 > 0).astype(np.int64)
for col in (cat_b, cat_d):
    col[rng.random(N) < 0.3] = None

table = np.empty((N, 4), dtype=object)  # input column order: num_a, cat_b, num_c, cat_d
table[:, 0], table[:, 1], table[:, 2], table[:, 3] = num_a, cat_b, num_c, cat_d
CATEGORICAL = [1, 3]


def process_text_na(table):
    """Fill missing categories with a placeholder, ordinal-encode (categorical columns first, as a
    ColumnTransformer orders its output), then put NaN back where the placeholder was."""
    table = table.copy()
    for c in CATEGORICAL:
        table[:, c] = np.where(pd_isna(table[:, c]), NA, table[:, c])
    placeholder_mask = table == NA
    encoded = []
    for c in CATEGORICAL:
        cats = sorted(set(table[:, c]))
        encoded.append(np.array([cats.index(v) for v in table[:, c]], dtype=np.float64))
    numeric = [c for c in range(table.shape[1]) if c not in CATEGORICAL]
    X_encoded = np.stack(encoded + [table[:, c].astype(np.float64) for c in numeric], 1)
__MASK__
    return X_encoded


def pd_isna(col):
    return np.array([v is None for v in col])


X = process_text_na(table)
features = np.concatenate([np.nan_to_num(X, nan=0.0), np.isnan(X).astype(np.float64)], 1)
x = torch.tensor(features, dtype=torch.float32)
y = torch.tensor(label)
x_train, y_train, x_test, y_test = x[:2400], y[:2400], x[2400:], y[2400:]
model = nn.Sequential(nn.Linear(x.shape[1], 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(30):
    perm = torch.randperm(2400)
    for i in range(0, 2400, 64):
        idx = perm[i:i + 64]
        loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():
    acc = (model(x_test).argmax(1) == y_test).float().mean()
print(f"METRIC {acc:.4f}")
'''

_BUG = "    X_encoded[placeholder_mask] = np.nan"
_TWIN = """    order = CATEGORICAL + numeric  # the encoder's output column order
    X_encoded[placeholder_mask[:, order]] = np.nan"""


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", _BUG if bug else _TWIN)
