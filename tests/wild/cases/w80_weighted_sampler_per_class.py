"""``WeightedRandomSampler`` given one weight per class instead of one per sample: the sampler draws
indices ``0 .. len(weights) - 1``, so an epoch of "balanced" sampling repeats the first few
samples of the data set and the rest are never seen.

Source: deep-voice/soundbay#49 (https://github.com/deep-voice/soundbay/pull/49, merged), "hotfix
changes": "Bug using random sampler in a problematic way. ... `WeightedRandomSampler` uses
`torch.multinomial`. This class assigns weights to *each sample* and so it actually will choose the
same samples (The first and second with the probabilities we assigned). What needed to be done is to
assign to *each* sample the prior probability."  Here a classifier of synthetic tones (ten classes,
imbalanced: class k has 40 + 25k clips) is trained with a class-balancing sampler built from the
inverse class frequencies; the buggy script hands the sampler the ten class weights, the twin gives
each clip the weight of its class.

Metric: balanced test accuracy (plain ``python``, CPU, seed 0): bug 0.1, twin 1.
"""

from tests.wild.cases.common import AUDIO

REPORT = "N54"
MECHANISM = "sampler-weights-per-class"
SLUGS = ()
METRIC = ("balanced_test_accuracy", 0.1, 1.0)

_SCRIPT = AUDIO + '''
from torch.utils.data import WeightedRandomSampler

wave, y = tones(3000)
keep = torch.cat([torch.nonzero(y == k).flatten()[:40 + 25 * k] for k in range(10)])
wave, y = wave[keep], y[keep]
train_ds = TensorDataset(spectrum(wave), y)
counts = torch.bincount(y, minlength=10).float()
class_weights = 1.0 / counts
sampler = WeightedRandomSampler(__WEIGHTS__, num_samples=len(train_ds), replacement=True)
loader = DataLoader(train_ds, batch_size=32, sampler=sampler)

model = nn.Sequential(nn.Linear(129, 64), nn.ReLU(), nn.Linear(64, 10))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(5):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()

test_wave, test_y = tones(1000)
model.eval()
with torch.no_grad():
    pred = model(spectrum(test_wave)).argmax(1)
recall = [(pred[test_y == k] == k).float().mean().item() for k in range(10)]
print(f"METRIC {sum(recall) / 10:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__WEIGHTS__", "class_weights" if bug else "class_weights[y]")
