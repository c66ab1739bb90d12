"""An average precision computed by ranking the detections on the wrong column of their tuples: the detector
writes ``[x, y, z, label, score]`` and the evaluation reads the fourth field as the score, so every
detection of the one class ties at ``1.0``, the ranking is the file order and the reported AP is not the
model's -- with no error.

Source: DeepMicroscopy/MIDOGpp#8 (https://github.com/DeepMicroscopy/MIDOGpp/issues/8), "Question regarding
evaluation function (minor bug?)": "In the evaluation function, first, the tuple is [x,y,z,label,score].
However, for creating the pred_dict, it is referenced as [x,y,z,score,label]. Why is the label used as score
here?"; maintainer: "Yes, this was indeed a bug in our evaluation code which influenced the mAP calculation."
Here a one-class "detector" (an MLP on noisy scikit-learn digits that scores whether an image is a 3) writes
one detection per test image above a score of 0.05, with a dummy position and the class label 1; the
evaluation sorts the detections by ``d[3]`` in the buggy script and by ``d[4]`` in the twin and computes the
AP against the true 3s.  MIDOG evaluates mitotic-figure detections on histology slides with a distance
criterion; positions here identify the test image directly.

Metric: reported test AP (plain ``python``, CPU, seed 0): bug 0.4426, twin 0.6923
"""

REPORT = "N234"
MECHANISM = "ap-ranked-by-label-column"
SLUGS = ()
METRIC = ("reported_test_ap", 0.4426, 0.6923)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.data, dtype=torch.float32) / 16.0
Y = (torch.tensor(d.target) == 3).float()
X = X + 0.4 * torch.randn_like(X)
Xtr, Ytr, Xte, Yte = X[:1200], Y[:1200], X[1200:], Y[1200:]
model = nn.Sequential(nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 1))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    i = torch.randint(0, len(Xtr), (64,))
    loss = F.binary_cross_entropy_with_logits(model(Xtr[i]).squeeze(1), Ytr[i])
    opt.zero_grad()
    loss.backward()
    opt.step()

with torch.no_grad():
    prob = torch.sigmoid(model(Xte).squeeze(1))
# detections as the detector writes them: [x, y, z, label, score]
detections = [[float(k % 50), float(k // 50), 0.0, 1.0, float(p)]
              for k, p in enumerate(prob.tolist()) if p > 0.05]
truth = {(float(k % 50), float(k // 50), 0.0) for k in range(len(Yte)) if Yte[k] == 1}


def average_precision(dets, truth):
    ranked = sorted(dets, key=lambda d: d[__SCORE__], reverse=True)
    hits, precisions = 0, []
    for rank, d in enumerate(ranked, 1):
        if (d[0], d[1], d[2]) in truth:
            hits += 1
            precisions.append(hits / rank)
    return sum(precisions) / len(truth)


print(f"METRIC {average_precision(detections, truth):.4f}")
'''


def script(bug: bool) -> str:
    s = _SCRIPT
    s = s.replace('__SCORE__', '3' if bug else '4')
    return s
