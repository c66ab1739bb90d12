"""A probabilistic pick labeller that centres the Gaussian label one sample before the arrival: the network learns
to put its peak one sample early, so every pick it makes is off by one sample -- with no error.

Source: seisbench/seisbench#181 (https://github.com/seisbench/seisbench/issues/181), "The labelled pick is always 1
sample less than the ground truth": ``ProbabilisticLabeller(label_columns=["trace_P1_arrival_sample"], sigma=5,
...)`` gives "Ground truth 6000.0 / Predicted 5999 ... This also occurs for other waveforms"; maintainer: "great
catch! There was indeed an off-by-one error here" (fixed by #183, "Fix labelling offset", merged). Here synthetic
traces (noise, then a decaying oscillation starting at a random arrival sample) are labelled with a Gaussian of
width 5 samples around the arrival, and a small 1-D convolutional picker is trained on them with binary
cross-entropy; the bug centres the label at ``arrival - 1``, the twin at ``arrival``. The metric is the share of
held-out traces whose picked sample (the arg-max of the output) is the true arrival. The reproduction replaces
the ETHZ waveforms and PhaseNet by the synthetic traces and the small picker.

Metric: share of test picks on the arrival sample (plain ``python``, CPU, seed 0): bug 0.0440, twin 0.9340
"""

REPORT = "N322"
MECHANISM = "pick-label-centred-one-sample-early"
SLUGS = ()
METRIC = ("test_exact_pick_rate", 0.0440, 0.9340)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
L, SIGMA = 256, 5


def make(n):
    arrival = torch.randint(40, L - 60, (n,))
    t = torch.arange(L).float()
    dt = (t - arrival[:, None].float()).clamp(min=0)
    freq = 0.3 + 0.4 * torch.rand(n, 1)
    onset = (t >= arrival[:, None]).float()
    signal = onset * torch.sin(freq * dt) * torch.exp(-dt / 40)
    x = signal + 0.05 * torch.randn(n, L)
    return x.unsqueeze(1), arrival


def label(arrival):
    t = torch.arange(L).float()
    centre = __CENTRE__
    return torch.exp(-0.5 * ((t - centre[:, None].float()) / SIGMA) ** 2)


Xtr, atr = make(3000)
Xte, ate = make(500)
ytr = label(atr)

model = nn.Sequential(nn.Conv1d(1, 16, 7, padding=3), nn.ReLU(), nn.Conv1d(16, 16, 7, padding=3), nn.ReLU(),
                      nn.Conv1d(16, 1, 7, padding=3))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(8):
    for i in torch.randperm(len(Xtr)).split(64):
        loss = F.binary_cross_entropy_with_logits(model(Xtr[i]).squeeze(1), ytr[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    pick = model(Xte).squeeze(1).argmax(1)
    exact = (pick == ate).float().mean().item()
print(f"METRIC {exact:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__CENTRE__', "arrival - 1" if bug else "arrival")
