"""Retrieval accuracy of a contrastive model computed with ``torch.argmax(logits)`` and no ``dim``:
the argmax of the flattened similarity matrix is one number, compared with every pair's index, so
the accuracy is at most one hit per batch whatever the model learned.

Source: Zasder3/train-CLIP#6 (https://github.com/Zasder3/train-CLIP/issues/6): "`acc_i =
(torch.argmax(image_logits) == ground_truth).sum()` ... torch.argmax retures the max value index
accross all dimensions"; the maintainer: "It looks like it! Thanks for catching this bug."  Here a
CLIP-style pair of encoders learns to match the top half of a digit with its bottom half
(symmetric cross-entropy over the batch's similarity matrix); validation accuracy is top-1
retrieval in batches of 100 pairs.  The twin takes the argmax over each row.

Metric: the reported validation retrieval accuracy (plain ``python``, CPU, seed 0): bug 0.0,
twin 0.27.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N40"
MECHANISM = "metric-argmax-without-dim"
SLUGS = ()
METRIC = ("val_retrieval_accuracy", 0.0, 0.27)

_SCRIPT = PRELUDE + '''
class CLIP(nn.Module):
    def __init__(self):
        super().__init__()
        self.top = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.bottom = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 32))
        self.logit_scale = nn.Parameter(torch.tensor(2.5))

    def forward(self, x):
        a = F.normalize(self.top(x[:, :32]), dim=1)
        b = F.normalize(self.bottom(x[:, 32:]), dim=1)
        return self.logit_scale.exp() * a @ b.t()


model = CLIP()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
loader = DataLoader(TensorDataset(X[:1400]), batch_size=64, shuffle=True)
for epoch in range(5):
    for (xb,) in loader:
        logits = model(xb)
        ground_truth = torch.arange(len(xb))
        loss = (F.cross_entropy(logits, ground_truth) + F.cross_entropy(logits.t(), ground_truth)) / 2
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
correct = total = 0
with torch.no_grad():
    for start in range(1400, 1700, 100):
        image_logits = model(X[start:start + 100])
        ground_truth = torch.arange(100)
        correct += (__ARGMAX__ == ground_truth).sum().item()
        total += 100
print(f"METRIC {correct / total:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ARGMAX__", "torch.argmax(image_logits)" if bug else "torch.argmax(image_logits, dim=1)")
