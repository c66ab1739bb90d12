"""A padding mask passed inverted to ``F.scaled_dot_product_attention``: a boolean ``attn_mask``
marks the positions that *take part* in attention, so a mask that is True on the padding sends
all the attention to the padding and none to the words.

Source: InseeFrLab/torchTextClassifiers#92 (https://github.com/InseeFrLab/torchTextClassifiers/pull/92,
merged): "Fix a bug in LabelAttention where the attention mask was inverted when passed to
F.scaled_dot_product_attention."  Here a text classifier pools word embeddings with a learned
query through ``scaled_dot_product_attention``; sentences of 4-10 words are padded to 12 tokens;
the buggy script passes the padding mask itself, the twin its negation.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.25, twin 1.0.
"""

from tests.wild.cases.common import FIT, TEXT

REPORT = "N32"
MECHANISM = "attention-mask-inverted"
SLUGS = ()
METRIC = ("val_accuracy", 0.25, 1.0)

_SCRIPT = TEXT + FIT + '''
PAD, LENGTH = 0, 12
INDEX = {w: i + 1 for i, w in enumerate(WORDS)}


def varied(n, seed):
    rng = random.Random(seed)
    out, labels = [], []
    for _ in range(n):
        c = rng.randrange(4)
        words = rng.sample(FILLER, rng.randint(2, 8)) + rng.sample(KEYWORDS[c], 2)
        rng.shuffle(words)
        out.append(words)
        labels.append(c)
    return out, torch.tensor(labels)


def encode(batch):
    return torch.tensor([[INDEX[w] for w in words] + [PAD] * (LENGTH - len(words)) for words in batch])


class AttentionPool(nn.Module):
    def __init__(self, dim=32):
        super().__init__()
        self.embed = nn.Embedding(len(WORDS) + 1, dim, padding_idx=PAD)
        self.query = nn.Parameter(torch.randn(1, 1, dim) * 0.1)
        self.fc = nn.Linear(dim, 4)

    def forward(self, tokens):
        h = self.embed(tokens)                                     # (B, L, D)
        padding = tokens == PAD                                    # True on padding
        mask = __MASK__[:, None, :]                                # (B, 1, L): True = takes part
        q = self.query.expand(len(tokens), 1, -1)
        pooled = F.scaled_dot_product_attention(q, h, h, attn_mask=mask)[:, 0]
        return self.fc(pooled)


train_x, train_y = varied(1200, seed=1)
val_x, val_y = varied(400, seed=2)
model = AttentionPool()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
fit(model, opt, DataLoader(TensorDataset(encode(train_x), train_y), batch_size=32, shuffle=True), 4)
model.eval()
with torch.no_grad():
    acc = (model(encode(val_x)).argmax(1) == val_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", "padding" if bug else "~padding")
