"""A table preprocessor that lowercases column names before recording which columns are numerical, then looks the
original names up in that list: a numerical column whose name has a capital letter is never found, so it skips the
power transform and reaches the model raw and heavy-tailed -- with no error.

Source: soda-inria/carte#12 (https://github.com/soda-inria/carte/issues/12): ``Table2GraphTransformer`` lowercases
the column names, so "numerical columns with capitalized names are not transformed by the PowerTransformer"
(labels: bug; closed). Here a table has four lognormal numerical columns, two of them capitalised (``Income``,
``Area``), and a binary target that depends on their logarithms; a preprocessor written like CARTE's records
``[c.lower() for c in numerical]`` and power-transforms each column whose name is in that list (bug) or records the
names unchanged (twin), and an MLP is trained on the result. CARTE's graph construction and its pretrained model
are replaced by the MLP on the transformed columns.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.9100, twin 0.9528
"""

REPORT = "N299"
MECHANISM = "column-lookup-after-lowercasing-names"
SLUGS = ()
METRIC = ("test_accuracy", 0.9100, 0.9528)

_SCRIPT = '''import numpy as np
import pandas as pd
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.preprocessing import PowerTransformer

torch.manual_seed(0)
rng = np.random.default_rng(0)
COLUMNS = ["Income", "Area", "age", "rooms"]


def table(n):
    logs = rng.normal(0, 1.2, (n, 4))
    frame = pd.DataFrame(np.exp(logs + 3), columns=COLUMNS)
    y = (logs @ np.array([1.0, -1.0, 0.5, 0.5]) + 0.3 * rng.normal(size=n) > 0).astype(np.int64)
    return frame, y


class Preprocessor:
    def fit(self, frame):
        self.numerical = __NAMES__
        self.transformers = {c: PowerTransformer().fit(frame[[c]]) for c in frame.columns if c in self.numerical}
        return self

    def transform(self, frame):
        frame = frame.copy()
        for c, t in self.transformers.items():
            frame[c] = t.transform(frame[[c]])[:, 0]
        return torch.tensor(frame.to_numpy(), dtype=torch.float32)


train, y_train = table(2000)
test, y_test = table(4000)
prep = Preprocessor().fit(train)
x_train, x_test = prep.transform(train), prep.transform(test)
y_train, y_test = torch.tensor(y_train), torch.tensor(y_test)

model = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(300):
    idx = torch.randint(0, len(x_train), (128,))
    loss = F.cross_entropy(model(x_train[idx]), y_train[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    acc = (model(x_test).argmax(1) == y_test).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__NAMES__', '[c.lower() for c in frame.select_dtypes("number").columns]' if bug
                           else 'list(frame.select_dtypes("number").columns)')
