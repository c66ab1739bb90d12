"""``MSELoss`` between a ``(N, 1)`` prediction and a ``(N,)`` target: broadcast to ``(N, N)``.

Source: pytorch/pytorch#16045 (https://github.com/pytorch/pytorch/issues/16045), which led to the
"Using a target size ... different to the input size" warning (pytorch/pytorch#18349); the loss
trains every prediction toward the mean target.  Here: regression of the digit's value.
"""

from tests.wild.cases.common import PRELUDE

SLUGS = ("wrong-loss-for-task",)

_SCRIPT = PRELUDE + '''
import warnings
warnings.simplefilter("ignore")  # the users in the report had not seen the warning either
model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 1))
opt = torch.optim.SGD(model.parameters(), lr=0.01)
loss_fn = nn.MSELoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
#@guard
for epoch in range(3):
    for xb, yb in train_loader:
        opt.zero_grad()
        loss = loss_fn({pred}, yb.float())
        loss.backward()
        opt.step()
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(pred="model(xb)" if bug else "model(xb).squeeze(1)")
