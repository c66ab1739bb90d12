"""A training length given in optimizer steps and turned into epochs with the number of samples
instead of the number of batches: the run stops after one epoch, a small fraction of the steps
asked for, while the learning-rate schedule is laid out for all of them.

Source: huggingface/finetrainers#37 (https://github.com/huggingface/finetrainers/issues/37),
"Computational of num_epoch seems incorrect": ``num_update_steps_per_epoch =
math.ceil(len(train_dataset) / args.gradient_accumulation_steps)`` / ``args.num_train_epochs =
math.ceil(args.max_train_steps / num_update_steps_per_epoch)`` -- "The current way of computing
`args.num_train_epochs` will result in early termination. For example, if we specify 500 steps, the
program will actually just run for a lot less steps"; maintainer: "Ah, this should have been:
`num_update_steps_per_epoch = math.ceil(len(train_dataloader) / args.gradient_accumulation_steps)`".
Here an MLP is trained on digits for ``max_train_steps = 600`` at batch 64 with a cosine schedule
over 600 steps; the buggy epoch count divides by ``len(train_dataset)``, the twin by
``len(train_loader)``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.2771, twin 0.8514.
"""

from tests.wild.cases.common import PRELUDE, VAL_ACCURACY

REPORT = "N97"
MECHANISM = "training-length-miscounted"
SLUGS = ()
METRIC = ("val_accuracy", 0.2771, 0.8514)

_SCRIPT = PRELUDE + '''
import math

MAX_TRAIN_STEPS, GRAD_ACCUM = 600, 1
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.05)
#@guard
scheduler = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=MAX_TRAIN_STEPS)
train_loader = DataLoader(train_ds, batch_size=64, shuffle=True)
num_update_steps_per_epoch = math.ceil(__LENGTH__ / GRAD_ACCUM)
num_train_epochs = math.ceil(MAX_TRAIN_STEPS / num_update_steps_per_epoch)
global_step = 0
for epoch in range(num_train_epochs):
    for xb, yb in train_loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
        scheduler.step()
        global_step += 1
        if global_step >= MAX_TRAIN_STEPS:
            break
print(f"{num_train_epochs} epochs, {global_step} steps")
''' + VAL_ACCURACY


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LENGTH__", "len(train_ds)" if bug else "len(train_loader)")
