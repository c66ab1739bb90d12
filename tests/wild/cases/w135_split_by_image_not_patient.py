"""Several images per patient split at random into training and test sets: the test set holds
near-copies of training images of the same patients, the classifier recognises the patient
rather than the disease, and the reported test accuracy is far above what it achieves on new
patients -- with no error.

Source: Lightning-Universe/lightning-Covid19#11 (https://github.com/Lightning-Universe/lightning-Covid19/issues/11),
"Possible data leakage?" (labels: bug, data): "On the original dataset, there are several images from
the same patient ... Should we take this into account when splitting the data?"; "The problem is
that images from a single patient can be in both (all) train, valid (test) sets."  Here each of 60
"patients" is one digits image, seen 10 times with noise and dropped pixels; the diagnosis is a
fixed function of the digit (positive for 5 of the 10 digits).  The buggy script picks 120 of the
600 images at random for the test set; the twin holds out all images of 12 patients (120 images).

Metric: reported test accuracy (plain ``python``, CPU, seed 0): bug 0.925, twin 0.775 (the bug reads
better: the twin is the accuracy on new patients).
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N109"
MECHANISM = "split-ignores-patient-groups"
SLUGS = ()
METRIC = ("reported_test_accuracy", 0.925, 0.775)

_SCRIPT = PRELUDE + '''
g = torch.Generator().manual_seed(1)
P, K = 60, 10
chosen = torch.randperm(len(X), generator=g)[:P]
base, digit = X[chosen], Y[chosen]
positive = torch.tensor([1, 0, 0, 1, 1, 0, 1, 0, 1, 0])
patient = torch.arange(P).repeat_interleave(K)
images = base[patient] + 0.15 * torch.randn(P * K, 64, generator=g)
images = images * (torch.rand(P * K, 64, generator=g) > 0.2)
label = positive[digit[patient]]

perm_images = torch.randperm(P * K, generator=g)
perm_patients = torch.randperm(P, generator=g)
is_test = __SPLIT__
xt, yt, xs, ys = images[~is_test], label[~is_test], images[is_test], label[is_test]

model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 2))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(100):
    opt.zero_grad()
    F.cross_entropy(model(xt), yt).backward()
    opt.step()

model.eval()
with torch.no_grad():
    acc = (model(xs).argmax(1) == ys).float().mean().item()
print(f"METRIC {acc:.4f}")
'''

_BUG = "torch.isin(torch.arange(P * K), perm_images[:120])  # 120 images at random"
_TWIN = "torch.isin(patient, perm_patients[:12])  # every image of 12 patients"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SPLIT__", _BUG if bug else _TWIN)
