"""A linear warmup-then-decay schedule called with the warmup steps and the training steps interchanged: the warmup
lasts the whole run, so the learning rate climbs to its peak at the last step instead of decaying to zero, and the
model ends training at its largest step size -- nothing fails.

Source: WasifurRahman/BERT_multimodal_transformer#22
(https://github.com/WasifurRahman/BERT_multimodal_transformer/pull/22), "fixed bug in mum_warmup_steps and
num_training_steps": "The assignments to mum_warmup_steps and num_training_steps were interchanged.
mum_warmup_steps should be warmup_proportion*num_train_optimization_steps and num_training_steps should be
num_train_optimization_steps."; reviewer: "LGTM ... @ath-08, thanks for pointing it out!" (merged). Here an
MLP learns digits with 20% noisy training labels for 1000 SGD steps (momentum 0.9, peak learning rate 0.5) under a
hand-written ``get_linear_schedule_with_warmup`` (the transformers formula); the bug passes ``num_warmup_steps =
num_train_optimization_steps`` and ``num_training_steps = 0.1 * num_train_optimization_steps``, the twin the other way
round. The reproduction replaces the multimodal BERT and AdamW by the MLP and SGD.

Metric: test accuracy on 497 digits with clean labels (plain ``python``, CPU, seed 0): bug 0.5392, twin 0.9396
"""

REPORT = "N362"
MECHANISM = "warmup-and-training-steps-swapped"
SLUGS = ()
METRIC = ('test_accuracy', 0.5392, 0.9396)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
X, y = load_digits(return_X_y=True)
X = torch.tensor(X, dtype=torch.float32) / 16.0
y = torch.tensor(y)
flip = torch.rand(len(y)) < 0.2
y_noisy = torch.where(flip, torch.randint(0, 10, y.shape), y)
perm = torch.randperm(len(y))
tr, te = perm[:1300], perm[1300:]
model = nn.Sequential(nn.Linear(64, 256), nn.ReLU(), nn.Linear(256, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
#@guard
num_train_optimization_steps = 1000
warmup_proportion = 0.1


def linear_schedule_with_warmup(optimizer, num_warmup_steps, num_training_steps):
    def lr_lambda(step):
        if step < num_warmup_steps:
            return step / max(1, num_warmup_steps)
        return max(0.0, (num_training_steps - step) / max(1, num_training_steps - num_warmup_steps))
    return torch.optim.lr_scheduler.LambdaLR(optimizer, lr_lambda)


__STEPS__sched = linear_schedule_with_warmup(opt, num_warmup_steps, num_training_steps)
for step in range(num_train_optimization_steps):
    i = tr[torch.randint(0, len(tr), (32,))]
    loss = F.cross_entropy(model(X[i]), y_noisy[i])
    opt.zero_grad()
    loss.backward()
    opt.step()
    sched.step()
with torch.no_grad():
    acc = (model(X[te]).argmax(1) == y[te]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    steps = (('num_warmup_steps = num_train_optimization_steps',
              'num_training_steps = int(warmup_proportion * num_train_optimization_steps)') if bug
             else ('num_warmup_steps = int(warmup_proportion * num_train_optimization_steps)',
                   'num_training_steps = num_train_optimization_steps'))
    s = s.replace('__STEPS__', '\n'.join(steps) + '\n')
    return s
