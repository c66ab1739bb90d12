"""An evaluation that takes ``argmax`` over the last axis of every model's output, including a
regression model's single output: the index of the maximum of one number is always 0, so every
prediction is 0 and the reported error is the error of predicting zero -- with no error raised.

Source: huggingface/transformers#11569 (https://github.com/huggingface/transformers/pull/11569), "Fix
metric computation in ``run_glue_no_trainer``": "There is a problem in the metric computation in
``run_glue_no_trainer``, which always takes the argmax regardless of the task: when the problem is a
regression problem it should not be the case" (fixes #11555; reviewer: "Indeed, nice fix!").  Here
an MLP with one output regresses a score (the digit's value, 0-9, as a regression label, like
STS-B's similarity) and the evaluation loop takes ``logits.argmax(dim=-1)`` (bug) or
``logits.squeeze(-1)`` (twin) as the predictions.

Metric: validation mean absolute error (plain ``python``, CPU, seed 0): bug 4.5164, twin 1.2786 (lower is
better).
"""

REPORT = "N137"
MECHANISM = "argmax-on-regression-output"
SLUGS = ()
METRIC = ("val_mae", 4.5164, 1.2786)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
score = torch.tensor(d.target, dtype=torch.float32)  # a regression label
model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(30):
    order = torch.randperm(1400)
    for i in range(0, 1400, 32):
        b = order[i:i + 32]
        loss = F.mse_loss(model(X[b]).squeeze(-1), score[b])
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
predictions, references = [], []
with torch.no_grad():
    for i in range(1400, len(X), 64):
        logits = model(X[i:i + 64])
        predictions.append(__PREDICT__)
        references.append(score[i:i + 64])
mae = (torch.cat(predictions).float() - torch.cat(references)).abs().mean().item()
print(f"METRIC {mae:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__PREDICT__", "logits.argmax(dim=-1)" if bug else "logits.squeeze(-1)")
