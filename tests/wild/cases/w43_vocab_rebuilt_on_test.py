"""The test set's vocabulary built from the test sentences themselves: the same word gets another
index than in training, so the embeddings the model learned are looked up for the wrong words.

Source: minqukanq/hierarchical-multi-label-text-classification#6
(https://github.com/minqukanq/hierarchical-multi-label-text-classification/issues/6): "vocabs in
train_dataset and test_dataset are not the same, that means the same token may have different
index ... I fix this bug and then the performance grows up."  Here a bag-of-embeddings classifier
on synthetic keyword sentences; each split numbers its words in order of first appearance, the
twin reuses the training vocabulary.

Metric: test accuracy (plain ``python``, CPU, seed 0): bug 0.172, twin 1.0.
"""

from tests.wild.cases.common import FIT, TEXT

REPORT = "N17"
MECHANISM = "eval-input-skew"
SLUGS = ("preprocessing-refit-on-eval",)
METRIC = ("test_accuracy", 0.172, 1.0)

_TAIL = FIT + '''
def build_vocab(corpus):
    vocab = {{}}
    for words in corpus:
        for w in words:
            vocab.setdefault(w, len(vocab))
    return vocab


def encode(corpus, vocab):
    return torch.tensor([[vocab[w] for w in words] for words in corpus])


train_text, train_y = sentences(1500, seed=1)
test_text, test_y = sentences(500, seed=2)
train_vocab = build_vocab(train_text)
test_vocab = {test_vocab}
model = nn.Sequential(nn.EmbeddingBag(len(WORDS), 16), nn.Linear(16, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
loader = DataLoader(TensorDataset(encode(train_text, train_vocab), train_y), batch_size=64, shuffle=True)
fit(model, opt, loader, 4)
with torch.no_grad():
    acc = (model(encode(test_text, test_vocab)).argmax(1) == test_y).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    return TEXT + _TAIL.format(test_vocab="build_vocab(test_text)" if bug else "train_vocab")
