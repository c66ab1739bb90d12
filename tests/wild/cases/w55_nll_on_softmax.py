"""``NLLLoss`` fed softmax probabilities instead of log-probabilities: the loss is ``-p`` of the
target class, always negative, and its gradient vanishes wherever the model is confidently wrong.

Source: AnubhavGupta3377/Text-Classification-Models-Pytorch#9
(https://github.com/AnubhavGupta3377/Text-Classification-Models-Pytorch/issues/9): "the input of
nn.NLLloss() is after logsoftmax ... here only softmax is provided in model.py therefore, the loss
is always negative."  Here a bag-of-embeddings text classifier (four topics, synthetic sentences)
ends in ``nn.Softmax`` and trains with ``nn.NLLLoss``; the twin ends in ``nn.LogSoftmax``.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.42, twin 0.94.
"""

from tests.wild.cases.common import TEXT

REPORT = "N29"
MECHANISM = "probabilities-into-nll"
SLUGS = ()
METRIC = ("val_accuracy", 0.42, 0.94)

_SCRIPT = TEXT + '''
INDEX = {w: i for i, w in enumerate(WORDS)}


def encode(batch):
    return torch.tensor([[INDEX[w] for w in words] for words in batch])


class TextClassifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.EmbeddingBag(len(WORDS), 16)
        self.fc = nn.Linear(16, 4)
        self.out = __OUT__

    def forward(self, tokens):
        return self.out(self.fc(self.embed(tokens)))


train_x, train_y = sentences(1200, seed=1)
val_x, val_y = sentences(400, seed=2)
model = TextClassifier()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
#@guard
loss_fn = nn.NLLLoss()
loader = DataLoader(TensorDataset(encode(train_x), train_y), batch_size=32, shuffle=True)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
    print(f"epoch {epoch}: loss {loss.item():.3f}")
model.eval()
with torch.no_grad():
    acc = (model(encode(val_x)).argmax(1) == val_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__OUT__", "nn.Softmax(dim=1)" if bug else "nn.LogSoftmax(dim=1)")
