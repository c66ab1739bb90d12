"""A recurrent one-step forecaster trained on windows that end at the last observation but asked, at prediction time,
with a window that ends one step earlier: the latest available ground truth is left out of the context, so each
forecast is made from stale data and is worse than the model can do -- nothing fails.

Source: Nixtla/neuralforecast#1285 (https://github.com/Nixtla/neuralforecast/pull/1285), "[FIX] Recurrent
predictions": "When setting `recurrent=True` in recursive models (LSTM, GRU, RNN) there is a bug that ignores the
latest available ground truth in the forecast (i.e., off-by-one error). This makes forecasts slightly worse, thus
fixing the bug improves forecast quality" (labels: bug; merged; reviewer: "Looks good!"). Here an AR(2) series is
learned by a GRU from windows of 24 values predicting the next one; the last 300 steps are forecast one step ahead;
the bug builds each test window as ``y[t - 1 - 24:t - 1]`` for target ``y[t]``, the twin as ``y[t - 24:t]``. The
reproduction replaces neuralforecast's models, scalers and multi-step horizons by a GRU with a one-step horizon.

Metric: mean absolute error of the forecasts on the last 300 steps (plain ``python``, CPU, seed 0, lower is better):
bug 0.4008, twin 0.2277
"""

REPORT = "N366"
MECHANISM = "forecast-context-drops-latest-observation"
SLUGS = ()
METRIC = ('test_mae', 0.4008, 0.2277)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
T = 1500
y = torch.zeros(T)
for t in range(2, T):
    y[t] = 1.3 * y[t - 1] - 0.5 * y[t - 2] + 0.3 * torch.randn(())
C, H = 24, 1


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.rnn = nn.GRU(1, 32, batch_first=True)
        self.out = nn.Linear(32, 1)

    def forward(self, x):
        h, _ = self.rnn(x.unsqueeze(-1))
        return self.out(h[:, -1]).squeeze(-1)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=5e-3)
#@guard
for step in range(500):
    s = torch.randint(0, 1200 - C - 1, (64,))
    ctx = torch.stack([y[i:i + C] for i in s.tolist()])
    loss = F.mse_loss(model(ctx), y[s + C])
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    ts = torch.arange(1200, T)
__END__    ctx = torch.stack([y[e - C:e] for e in end.tolist()])
    mae = (model(ctx) - y[ts]).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__END__', '    end = ts - 1\n' if bug
                  else '    end = ts\n')
    return s
