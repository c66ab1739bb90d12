"""PSNR computed on normalised images with the peak value of the unnormalised range: the inputs were
standardised with the dataset's mean and standard deviation, so their range is several units wide, but
the PSNR still uses a peak of 1 -- every reconstruction is reported many decibels worse than it is, with
no error.

Source: JonasGeiping/invertinggradients#3 (https://github.com/JonasGeiping/invertinggradients/issues/3),
"factor used in calculating PSNR": "In your jupyter notebook ... you use `test_psnr =
inversefed.metrics.psnr(output, ground_truth)` to calculate the PSNR of the recovered image (parameter
factor=1). However, in "reconstruct_image.py", you used ... an extract factor 1/ds"; maintainer: "Hi, you
correct this is an oversight in the jupyter notebook. The data is normalized and as such the PSNR formula
has to be modified to account for the new maximal value as in the command-line script. I'll push a fix to
this problem."  Here a gradient-inversion attack (40 Adam steps matching the gradients of one sample, label known)
recovers eight digits, standardised with the dataset's mean and standard deviation, from a small MLP's
gradients; the buggy PSNR uses ``factor=1`` on the standardised images, the twin ``factor=1 / ds`` (the
peak of the standardised range).

Metric: the reported mean PSNR (dB) of the eight reconstructions (plain ``python``, CPU, seed 0): bug
12.3451, twin 20.8402 (higher is better; the images and the reconstructions are the same in both)
"""

REPORT = "N183"
MECHANISM = "psnr-peak-not-rescaled-to-normalised-range"
SLUGS = ()
METRIC = ("reported_psnr_db", 12.3451, 20.8402)

_SCRIPT = '''
import math

import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
digits = load_digits()
images = torch.tensor(digits.data / 16.0, dtype=torch.float32)
dm, ds = images.mean().item(), images.std().item()
x_all = (images - dm) / ds
y_all = torch.tensor(digits.target)


def psnr(img_batch, ref_batch, factor=1.0):
    mse = ((img_batch - ref_batch) ** 2).mean().item()
    return 10 * math.log10(factor ** 2 / mse)


model = nn.Sequential(nn.Linear(64, 32), nn.Sigmoid(), nn.Linear(32, 10))
opt = torch.optim.SGD(model.parameters(), lr=0.1)
#@guard
for step in range(100):
    idx = torch.randint(0, 1000, (64,))
    loss = F.cross_entropy(model(x_all[idx]), y_all[idx])
    opt.zero_grad()
    loss.backward()
    opt.step()

scores = []
for k in range(1500, 1508):
    x_true, y_true = x_all[k:k + 1], y_all[k:k + 1]
    target_grads = [gr.detach() for gr in torch.autograd.grad(F.cross_entropy(model(x_true), y_true),
                                                              model.parameters())]
    dummy = torch.randn(1, 64, requires_grad=True)
    attack = torch.optim.Adam([dummy], lr=0.1)
    for it in range(40):
        grads = torch.autograd.grad(F.cross_entropy(model(dummy), y_true), model.parameters(), create_graph=True)
        match = sum(((a - b) ** 2).sum() for a, b in zip(grads, target_grads))
        attack.zero_grad()
        match.backward()
        attack.step()
    scores.append(psnr(dummy.detach(), x_true, factor=__FACTOR__))
print(f"METRIC {sum(scores) / len(scores):.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__FACTOR__", "1.0" if bug else "1 / ds")
