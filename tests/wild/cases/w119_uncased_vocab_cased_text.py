"""An uncased vocabulary fed text that was not lower-cased: every capitalised word is missing from
the vocabulary and becomes ``[UNK]``, so the model sees only the words that happened to be written in
lower case.

Source: huggingface/transformers#4000 (https://github.com/huggingface/transformers/pull/4000),
"Adding --do_lower_case option": "In SQuAD 1.1 using the uncased BERT model, **--do_lower_case**
option must be used for initialization of a tokenizer. Omitting this optional argument, the
performance in development set would be lower around 8-9pt in both EM and F1" (also
huggingface/transformers#131, "[UNK]" for words a tokenizer did not lower-case).  Here the
vocabulary is built lower-case, as an uncased model's is; the sentences of four topics capitalise
each word with probability 0.6 (titles, names, sentence starts); a bag-of-embeddings classifier is
trained and evaluated; the buggy tokenizer looks words up as written, the twin lower-cases first.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.7533, twin 1.0.
"""

from tests.wild.cases.common import TEXT

REPORT = "N93"
MECHANISM = "tokenizer-casing-mismatch"
SLUGS = ()
METRIC = ("val_accuracy", 0.7533, 1.0)

_SCRIPT = TEXT + '''
UNK = 0
vocab = {w: i + 1 for i, w in enumerate(WORDS)}                # an uncased vocabulary: lower-case entries


def cased(sents, seed):
    rng = random.Random(seed)
    return [[w.capitalize() if rng.random() < 0.6 else w for w in s] for s in sents]


def tokenize(words):
    return torch.tensor([vocab.get(__WORD__, UNK) for w in words])


train_sents, train_y = sentences(1200, seed=1)
val_sents, val_y = sentences(300, seed=2)
train_ids = torch.stack([tokenize(s) for s in cased(train_sents, 3)])
val_ids = torch.stack([tokenize(s) for s in cased(val_sents, 4)])

model = nn.Sequential(nn.EmbeddingBag(len(vocab) + 1, 32), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for epoch in range(10):
    for k in range(0, len(train_ids), 32):
        opt.zero_grad()
        F.cross_entropy(model(train_ids[k:k + 32]), train_y[k:k + 32]).backward()
        opt.step()

model.eval()
with torch.no_grad():
    acc = (model(val_ids).argmax(1) == val_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__WORD__", "w" if bug else "w.lower()")
