"""A prediction head of two ``Linear`` layers with no nonlinearity between them: their composition is one linear map, so
the agent's state vector, which enters the network only at the head, can shape the predicted trajectory only
linearly, and a trajectory that depends on speed times the cosine of the heading is out of reach -- the model trains
and predicts badly without an error.

Source: nutonomy/nuscenes-devkit#728 (https://github.com/nutonomy/nuscenes-devkit/issues/728): the MTP model's head
applies its two fully connected layers one after the other with no activation between them; maintainer: "Ooops, that
looks like an error. Good catch." Here an MTP-like model concatenates a backbone's features of a context vector with the
agent state (speed, heading, a distractor) and predicts six future positions moving at that speed along that heading
(plus an offset from the context); the bug feeds ``head_fc1``'s output straight to ``head_fc2``, the twin puts a ReLU
between. The reproduction replaces the rasterised map and ResNet backbone by a context vector and an MLP, and the
multi-modal trajectories and their classification loss by one trajectory and MSE.

Metric: average displacement error on 2000 new agents (plain ``python``, CPU, seed 0; lower is better): bug 3.1431, twin
0.6350
"""

REPORT = "N345"
MECHANISM = "stacked-linear-layers-without-activation"
SLUGS = ()
METRIC = ('test_ade', 3.1431, 0.635)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
H = 6


def batch(n):
    context = torch.randn(n, 8)
    speed, heading = torch.rand(n) * 2, (torch.rand(n) * 2 - 1) * 3.14
    state = torch.stack([speed, heading, torch.randn(n)], 1)
    t = torch.arange(1, H + 1).float()
    offset = torch.tanh(context[:, :1])
    xs = speed[:, None] * t * torch.cos(heading)[:, None] + offset
    ys = speed[:, None] * t * torch.sin(heading)[:, None]
    return context, state, torch.cat([xs, ys], 1)


class MTP(nn.Module):
    def __init__(self):
        super().__init__()
        self.backbone = nn.Sequential(nn.Linear(8, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU())
        self.head_fc1 = nn.Linear(64 + 3, 128)
        self.head_fc2 = nn.Linear(128, 2 * H)

    def forward(self, context, state):
        features = torch.cat([self.backbone(context), state], 1)
        return self.head_fc2(__HIDDEN__)


model = MTP()
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for step in range(1500):
    context, state, target = batch(128)
    loss = F.mse_loss(model(context, state), target)
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    context, state, target = batch(2000)
    ade = (model(context, state) - target).view(-1, 2, H).norm(dim=1).mean().item()
print(f"METRIC {ade:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__HIDDEN__', 'self.head_fc1(features)' if bug
                           else 'F.relu(self.head_fc1(features))')
