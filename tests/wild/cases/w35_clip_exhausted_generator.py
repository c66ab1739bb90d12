"""``clip_grad_norm_`` handed a ``model.parameters()`` generator that was already consumed: it
clips an empty list, silently, and the large learning rate that relied on clipping blows the
training up.

Source: pytorch/pytorch#148259 (https://github.com/pytorch/pytorch/issues/148259): "if that
iterable is a generator that has already been consumed, then it's effectively empty when passed
in, and no gradient clipping occurs - silently" (pytorch/torchtitan#1258 found the same in
torchtitan's own ``clip_grad_norm_``).  Here the script iterates the generator to log the gradient
norms, then passes it to ``clip_grad_norm_``; the twin passes a list.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.0982, twin 0.8715.
"""

from tests.wild.cases.common import ACCURACY, PRELUDE

REPORT = "N09"
MECHANISM = "clip-no-params"
SLUGS = ()
METRIC = ("val_accuracy", 0.0982, 0.8715)

_SCRIPT = PRELUDE + ACCURACY + '''
model = nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 128), nn.ReLU(), nn.Linear(128, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
loss_fn = nn.CrossEntropyLoss()
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
val_loader = DataLoader(val_ds, batch_size=128)
for epoch in range(3):
    for step, (xb, yb) in enumerate(train_loader):
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        params_to_clip = {params}
        grad_norms = [p.grad.norm().item() for p in params_to_clip]   # logged
        torch.nn.utils.clip_grad_norm_(params_to_clip, max_norm=0.5)
        opt.step()
    print(f"epoch {{epoch}}: loss {{loss.item():.3f}} val accuracy {{accuracy(model, val_loader):.3f}}")
print(f"METRIC {{accuracy(model, val_loader):.4f}}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.format(params="model.parameters()" if bug else "list(model.parameters())")
