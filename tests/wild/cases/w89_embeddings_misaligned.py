"""Pretrained word vectors copied into the embedding matrix by the wrong index: the row for each
word of the data set's vocabulary is taken from the pretrained matrix at that word's *data-set*
index, not at the pretrained vocabulary's index of the word, so almost every word gets another
word's vector.  With the embeddings frozen, the classifier sees scrambled word meanings.

Source: DSKSD/DeepNLP-models-Pytorch#12 (https://github.com/DSKSD/DeepNLP-models-Pytorch/issues/12),
"about pretrained embeddings": "`pretrained.append(model[word2index[key]])`. word2index[key] means to
find key's index, then you should find its pretrained embedding in GoogleNews-vectors-negative300.bin.
But the index in this bin file should be different from the index generated from TREC dataset, i.e.
model[key's index] may not be this key's (word's) embedding"; maintainer: "Yeah you're right. There
are some bugs in this project".  Also delip/PyTorchNLPBook#22.  Here 8-dimensional word vectors are
pretrained on a topic task over the synthetic sentences (vocabulary in frequency order, as word2vec
stores it); a new data set of the same topics builds its own vocabulary (order of first
appearance) and a classifier with the pretrained embeddings frozen (``nn.EmbeddingBag.from_pretrained``)
and a linear head is trained on 200 labelled sentences.  The twin looks each word up in the
pretrained vocabulary.

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.55, twin 1.
"""

from tests.wild.cases.common import TEXT

REPORT = "N63"
MECHANISM = "pretrained-embeddings-misindexed"
SLUGS = ()
METRIC = ("val_accuracy", 0.55, 1.0)

_SCRIPT = TEXT + '''
from collections import Counter

# pretraining: word vectors learnt on a large corpus, stored with their own vocabulary
corpus, corpus_y = sentences(4000, seed=10)
freq = Counter(w for s in corpus for w in s)
pre_itos = [w for w, _ in freq.most_common()]
pre_stoi = {w: i for i, w in enumerate(pre_itos)}
pre_embed = nn.EmbeddingBag(len(pre_itos), 8)
pre_head = nn.Linear(8, 4)
pre_opt = torch.optim.Adam(list(pre_embed.parameters()) + list(pre_head.parameters()), lr=1e-2)
tokens = torch.tensor([[pre_stoi[w] for w in s] for s in corpus])
for epoch in range(3):
    for i in range(0, len(tokens), 64):
        pre_opt.zero_grad()
        F.cross_entropy(pre_head(pre_embed(tokens[i:i + 64])), corpus_y[i:i + 64]).backward()
        pre_opt.step()
vectors = pre_embed.weight.detach()                                # row i is the vector of pre_itos[i]

# the downstream data set and its own vocabulary
train_x, train_y = sentences(200, seed=1)
val_x, val_y = sentences(400, seed=2)
word2index = {}
for s in train_x + val_x:
    for w in s:
        word2index.setdefault(w, len(word2index))
pretrained = torch.stack([vectors[__ROW__] for key in word2index])


def encode(batch):
    return torch.tensor([[word2index[w] for w in s] for s in batch])


model = nn.Sequential(nn.EmbeddingBag.from_pretrained(pretrained, freeze=True), nn.Linear(8, 4))
opt = torch.optim.Adam([p for p in model.parameters() if p.requires_grad], lr=1e-2)
#@guard
loader = DataLoader(TensorDataset(encode(train_x), train_y), batch_size=32, shuffle=True)
for epoch in range(10):
    for xb, yb in loader:
        opt.zero_grad()
        F.cross_entropy(model(xb), yb).backward()
        opt.step()
model.eval()
with torch.no_grad():
    acc = (model(encode(val_x)).argmax(1) == val_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__ROW__", "word2index[key]" if bug else "pre_stoi[key]")
