"""A sequence classifier that pools over every position, padding included: without the attention
mask a sequence's representation depends on how much padding its batch needs, so the same
sentence is classified differently in different batches.

Source: BitVoyage/FastBERT#14 (https://github.com/BitVoyage/FastBERT/issues/14): the
classification layer's forward did not use the attention mask, "which makes padding affect the
results"; the author called it a bug (BAAI-DCAI/Bunny#93 reports the same for left padding with an
all-ones attention mask: accuracy 41 -> 34 in batched inference).  Here the training batches are
bucketed by length, as a BucketIterator makes them, so they need almost no padding; evaluation
batches mix lengths.  The twin pools under the padding mask.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7825, twin 1.0.
"""

from tests.wild.cases.common import TEXT

REPORT = "N14"
MECHANISM = "batch-mixed"
SLUGS = ()
METRIC = ("val_accuracy", 0.7825, 1.0)

_TAIL = '''
PAD = 0


def make(n, seed):
    rng = random.Random(seed)
    seqs, labels = [], []
    for _ in range(n):
        length = rng.randint(4, 24)
        seq = [rng.randint(1, 9) for _ in range(length)]
        seqs.append(seq)
        labels.append(int(seq.count(1) > seq.count(2)))
    return seqs, labels


def batches(seqs, labels, size, bucket, seed):
    order = sorted(range(len(seqs)), key=lambda i: len(seqs[i])) if bucket else list(range(len(seqs)))
    groups = [order[i:i + size] for i in range(0, len(order), size)]
    random.Random(seed).shuffle(groups)
    for g in groups:
        width = max(len(seqs[i]) for i in g)
        ids = torch.tensor([seqs[i] + [PAD] * (width - len(seqs[i])) for i in g])
        yield ids, (ids != PAD), torch.tensor([labels[i] for i in g])


class Pooler(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 16)
        self.head = nn.Linear(16, 2)

    def forward(self, ids, attention_mask):
        h = self.embed(ids)
        pooled = {pool}
        return self.head(pooled)


train = make(1400, 1)
val = make(400, 2)
model = Pooler()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(6):
    for ids, mask, y in batches(*train, 32, bucket=True, seed=epoch):
        opt.zero_grad()
        F.cross_entropy(model(ids, mask), y).backward()
        opt.step()
model.eval()
correct = 0
with torch.no_grad():
    for ids, mask, y in batches(*val, 32, bucket=False, seed=0):
        correct += (model(ids, mask).argmax(1) == y).sum().item()
print(f"METRIC {{correct / 400:.4f}}")
'''


def script(bug: bool) -> str:
    pool = "h.sum(1)" if bug else "(h * attention_mask[..., None]).sum(1)"
    return TEXT + _TAIL.format(pool=pool)
