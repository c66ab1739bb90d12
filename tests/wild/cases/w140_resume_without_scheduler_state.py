"""A run resumed from a checkpoint that restores the model but not the optimizer's and the
scheduler's state: the learning rate starts again from its initial value instead of the decayed
one, and the last epochs undo the fine convergence of the decayed phase -- with no error.

Source: KaiyangZhou/deep-person-reid#270 (https://github.com/KaiyangZhou/deep-person-reid/issues/270),
"Resume training, how to let the learning rate drop on the original basis?": "I found that the
learning rate did not drop according to the state before the interruption, but started a new drop
pattern"; "the learning rate didn't drop at the break point, it dropped from the initial 0.0015";
another user: "Isn't it purposeful to also store the lr_scheduler state in the checkpoint file?";
maintainer: "just updated the code to add scheduler to `resume_from_checkpoint`".  Here an MLP is
trained on digits with Adam (rate 0.03) and a ``MultiStepLR`` that divides the rate by
100 after epoch 6; the run is interrupted after epoch 10 and resumed for epochs 10-15 from a
checkpoint holding the model, the optimizer and the scheduler.  The buggy resume loads only the
model; the twin also loads the optimizer's and the scheduler's state dicts.

Metric: validation loss at the end (plain ``python``, CPU, seed 0): bug 0.3957, twin 0.2583 (lower is
better).
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N114"
MECHANISM = "resume-without-scheduler-state"
SLUGS = ()
METRIC = ("val_loss", 0.3957, 0.2583)

_SCRIPT = PRELUDE + '''
import io


def build():
    net = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 10))
    optimizer = torch.optim.Adam(net.parameters(), lr=0.03)
    return net, optimizer, torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones=[6], gamma=0.01)


def train(net, optimizer, scheduler, epochs):
    for epoch in epochs:
        for xb, yb in DataLoader(train_ds, batch_size=32, shuffle=True):
            optimizer.zero_grad()
            F.cross_entropy(net(xb), yb).backward()
            optimizer.step()
        scheduler.step()


model, opt, scheduler = build()
#@guard
train(model, opt, scheduler, range(0, 10))
checkpoint = io.BytesIO()
torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "scheduler": scheduler.state_dict()},
           checkpoint)

# --- the job is interrupted here and started again with --resume ---
checkpoint.seek(0)
state = torch.load(checkpoint)
model, opt, scheduler = build()
model.load_state_dict(state["model"])
__RESTORE__
train(model, opt, scheduler, range(10, 16))

model.eval()
with torch.no_grad():
    val_loss = F.cross_entropy(model(X[1400:]), Y[1400:]).item()
print(f"METRIC {val_loss:.4f}")
'''

_TWIN = 'opt.load_state_dict(state["optimizer"])\nscheduler.load_state_dict(state["scheduler"])'


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESTORE__", "" if bug else _TWIN)
