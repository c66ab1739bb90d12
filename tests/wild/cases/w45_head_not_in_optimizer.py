"""Fine-tuning with an optimizer built over the pretrained encoder only: the new, randomly
initialised classification head never moves.

Source: huggingface/pytorch-openai-transformer-lm#6
(https://github.com/huggingface/pytorch-openai-transformer-lm/pull/6): "The target of an
optimizer should contain clf_head (new task-specific output matrix) in addition to model
(Transformer encoder)"; the maintainer agreed.  Here an encoder is pre-trained on digits 0-4, then
fine-tuned with a new head on digits 5-9, the encoder at a small learning rate; the twin gives
the head its own parameter group.

Metric: validation accuracy on digits 5-9 after fine-tuning (plain ``python``, CPU, seed 0):
bug 0.2211, twin 0.6633.
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N19"
MECHANISM = "params-not-optimized"
SLUGS = ("params-not-optimized",)
METRIC = ("val_accuracy", 0.2211, 0.6633)

_SCRIPT = PRELUDE + '''
def fit(model, params, x, y, epochs):
    opt = torch.optim.Adam(params)
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    for epoch in range(epochs):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()


class Classifier(nn.Module):
    def __init__(self, encoder, n_classes):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(64, n_classes)

    def forward(self, x):
        return self.head(self.encoder(x))


Xtr, Ytr, Xva, Yva = X[:1400], Y[:1400], X[1400:], Y[1400:]
low, high = Ytr < 5, Ytr >= 5
encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU())
pretrain = Classifier(encoder, 5)
fit(pretrain, [{{"params": pretrain.parameters(), "lr": 1e-2}}], Xtr[low], Ytr[low], 3)  # "pre-training"

model = Classifier(encoder, 5)                                     # a new head for digits 5-9
fit(model, {params}, Xtr[high], Ytr[high] - 5, 3)  # fine-tuning: a small lr for the encoder
model.eval()
keep = Yva >= 5
with torch.no_grad():
    acc = (model(Xva[keep]).argmax(1) == Yva[keep] - 5).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    encoder = '{"params": model.encoder.parameters(), "lr": 1e-4}'
    head = '{"params": model.head.parameters(), "lr": 1e-2}'
    return _SCRIPT.format(params=f"[{encoder}]" if bug else f"[{encoder}, {head}]")
