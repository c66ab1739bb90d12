"""Trigonometric position features taken of latitudes and longitudes in degrees: ``np.sin(lat_lons)`` treats 45
degrees as 45 radians, so the features wrap around every 6.3 degrees and no longer say where a node is, and a
model that must know latitude to predict the field cannot learn it -- the features have the right shape and range.

Source: openclimatefix/graph_weather#51 (https://github.com/openclimatefix/graph_weather/issues/51), "Sin/Cos of
Lat/Lon in degrees?": "If I am not mistaken, the lat & lon given as input to the sine & cose functions are in
degrees. Should it then not be? ``sin_lat_lons = np.sin(lat_lons * np.pi / 180.)``"; maintainer: "Oh, yeah, you
are right! It should be in radians, I'll update it soon" (fixed, and the same in the loss's latitude weights).
Here an MLP over the nodes of a 5-degree latitude-longitude grid predicts a field that depends on latitude and on a
travelling wave in longitude, from the nodes' sin/cos position features and the wave's phase; the features are
``np.sin(lat_lons)``/``np.cos(lat_lons)`` (the bug) or of ``lat_lons * np.pi / 180.0`` (the twin). The
reproduction departs from the report in the model (a per-node MLP instead of the graph weather network's
encoder-processor-decoder) and the data (a synthetic field instead of ERA5/GFS).

Metric: test RMSE over 16 held-out phases (lower is better; plain ``python``, CPU, seed 0): bug 2.5728, twin 0.7632
"""

REPORT = "N443"
MECHANISM = "trigonometric-features-of-degrees"
SLUGS = ()
METRIC = ("test_rmse", 2.5728, 0.7632)

_SCRIPT = '''
import numpy as np
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
rng = np.random.default_rng(0)
lats = np.linspace(-87.5, 87.5, 36)
lons = np.arange(0, 360, 5.0)
lat_grid, lon_grid = np.meshgrid(lats, lons, indexing="ij")
lat_lons = np.stack([lat_grid.ravel(), lon_grid.ravel()], 1)           # degrees, as stored in the grid


def field(lat_lons, phase):
    lat, lon = np.radians(lat_lons[:, 0]), np.radians(lat_lons[:, 1])
    return 30 * np.cos(lat) ** 2 - 10 + 5 * np.sin(2 * lon + phase) * np.cos(lat)


phases = rng.uniform(0, 2 * np.pi, 64)
sin_lat_lons = __SIN__
cos_lat_lons = __COS__
position = torch.tensor(np.concatenate([sin_lat_lons, cos_lat_lons], 1), dtype=torch.float32)


def batch(ph):
    """Node inputs (position features, the phase of the day's wave) and the next state to predict."""
    state = torch.tensor(field(lat_lons, ph), dtype=torch.float32)
    inputs = torch.cat([position, torch.full((len(lat_lons), 2), 0.0) + torch.tensor([np.sin(ph), np.cos(ph)],
                                                                                      dtype=torch.float32)], 1)
    return inputs, state


train = [batch(p) for p in phases[:48]]
test = [batch(p) for p in phases[48:]]
model = nn.Sequential(nn.Linear(6, 128), nn.SiLU(), nn.Linear(128, 128), nn.SiLU(), nn.Linear(128, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(40):
    for i in torch.randperm(len(train)).tolist():
        x, y = train[i]
        loss = F.mse_loss(model(x).squeeze(1), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    rmse = torch.stack([F.mse_loss(model(x).squeeze(1), y) for x, y in test]).mean().sqrt().item()
print(f"METRIC {rmse:.4f}")
'''


def script(bug: bool) -> str:
    sin, cos = ("np.sin(lat_lons)", "np.cos(lat_lons)") if bug else \
        ("np.sin(lat_lons * np.pi / 180.0)", "np.cos(lat_lons * np.pi / 180.0)")
    return _SCRIPT.replace("__SIN__", sin).replace("__COS__", cos)
