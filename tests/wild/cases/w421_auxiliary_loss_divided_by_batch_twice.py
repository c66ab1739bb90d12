"""One term of a multi-task loss divided by the batch size twice: the branch losses are summed and divided by the
batch size, the speed loss is divided by it once more, so the auxiliary task weighs 1/B of what it should; the
shared trunk is shaped by the main task alone and the speed head reads features that barely carry speed -- nothing
fails.

Source: felipecode/coiltraine#37 (https://github.com/felipecode/coiltraine/issues/37), "Bug: dividing speed_loss by
batch size twice": "`speed_loss = loss_branches_vec[4]/(params['branches'][0].shape[0])` ... `return
torch.sum(loss_function) / (params['branches'][0].shape[0]) + torch.sum(speed_loss) /
(params['branches'][0].shape[0])` It seems the speed_loss is being divided by ... (the batch_size?) twice instead of
only once"; maintainer: "Yes, I found this recently. It was dividing twice. Thanks for pointing this out. I wouldnt'
change that on the repository since this is necessary in order to reproduce the results." Here a network with a
narrow shared trunk, a control head (three outputs driven by some input features) and a speed head (one output
driven by others) is trained with Adam on batches of 120 (coiltraine's batch size), with the losses written like
coiltraine's; the bug divides the speed loss by the batch size twice, the twin once. The reproduction replaces
camera images, the conditional branches and CARLA driving by synthetic features, one control head and regression
targets.

Metric: test speed mean squared error (lower is better; plain ``python``, CPU, seed 0): bug 0.2896, twin 0.0585
"""

REPORT = "N395"
MECHANISM = "auxiliary-loss-divided-by-batch-twice"
SLUGS = ()
METRIC = ("test_speed_mse", 0.2896, 0.0585)

_SCRIPT = '''import torch
from torch import nn

torch.manual_seed(0)
B = 120
x = torch.randn(6000, 16)
control = torch.stack([x[:, :4].sum(1), (x[:, 2:6] ** 2).sum(1) / 4, x[:, 0] * x[:, 1]], 1)
speed = (x[:, 8:12].sum(1, keepdim=True)).tanh() + 0.5 * x[:, 12:13]


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 6), nn.ReLU())
        self.branch = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 3))
        self.speed = nn.Sequential(nn.Linear(6, 64), nn.ReLU(), nn.Linear(64, 1))

    def forward(self, x):
        h = self.trunk(x)
        return self.branch(h), self.speed(h)


model = Net()
opt = torch.optim.Adam(model.parameters(), lr=2e-4)
#@guard
for step in range(4000):
    i = torch.randint(0, 5000, (B,))
    branch_out, speed_out = model(x[i])
    loss_branches_vec = [(branch_out - control[i]) ** 2, (speed_out - speed[i]) ** 2]
    loss_function = loss_branches_vec[0]
__SPEED__
    loss = torch.sum(loss_function) / B + torch.sum(speed_loss) / B
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    mse = ((model(x[5000:])[1] - speed[5000:]) ** 2).mean().item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SPEED__", "    speed_loss = loss_branches_vec[1] / B" if bug
                           else "    speed_loss = loss_branches_vec[1]")
