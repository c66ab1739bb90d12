"""Embeddings "frozen" by zeroing their gradients but left in an AdamW with weight decay: decoupled
weight decay shrinks every row of the embedding matrix at every step whatever its gradient, so the
pretrained vocabulary the textual-inversion run meant to keep fixed drifts towards zero and the model
forgets what its words mean.

Source: huggingface/diffusers#1009 (https://github.com/huggingface/diffusers/issues/1009, labelled
bug), "Weight decay bug in textual_inversion.py": "the word embeddings of all the tokens except the
newly added token are supposed to be frozen. The way the script does this is by zeroing out the
gradients for everything except the last token. However, this still subjects the pre-trained word
embeddings to weight decay. This means that these 'frozen' embeddings are still changing, and with
enough training will decay to 0."  Here a text classifier (embedding bag and MLP over the synthetic topic sentences) is
pretrained and frozen, a new token is added and its embedding learnt so that sentences with it read as
topic 3, zeroing the other rows' gradients, with ``AdamW(lr=1e-2, weight_decay=0.5)`` for 1000 steps
("enough training" in seconds: lr x decay x steps = 5); the twin copies the original rows back after
each step.

Metric: accuracy of the fine-tuned model on the original topic task (plain ``python``, CPU, seed 0): bug 0.295, twin 1.
"""

from tests.wild.cases.common import TEXT

REPORT = "N74"
MECHANISM = "frozen-rows-weight-decayed"
SLUGS = ()
METRIC = ("original_task_val_accuracy", 0.295, 1.0)

_SCRIPT = TEXT + '''
INDEX = {w: i for i, w in enumerate(WORDS)}
NEW = len(WORDS)                                                    # the placeholder token's id


def encode(batch):
    return torch.tensor([[INDEX.get(w, NEW) for w in s] for s in batch])


embed = nn.EmbeddingBag(len(WORDS) + 1, 16)
head = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
train_x, train_y = sentences(2000, seed=1)
pre_opt = torch.optim.Adam(list(embed.parameters()) + list(head.parameters()), lr=1e-2)
tokens = encode(train_x)
for epoch in range(3):
    for i in range(0, len(tokens), 64):
        pre_opt.zero_grad()
        F.cross_entropy(head(embed(tokens[i:i + 64])), train_y[i:i + 64]).backward()
        pre_opt.step()
head.requires_grad_(False)

# textual inversion: learn only the new token's row
rng = random.Random(3)
concept = [rng.sample(FILLER, 8) + ["<new>", "<new>"] for _ in range(256)]
concept_y = torch.full((256,), 3)
orig = embed.weight.detach().clone()
keep = torch.ones(len(WORDS) + 1, dtype=torch.bool)
keep[NEW] = False
model = nn.Sequential(embed, head)
opt = torch.optim.AdamW(embed.parameters(), lr=1e-2, weight_decay=0.5)
#@guard
concept_tokens = encode(concept)
for step in range(1000):
    batch = torch.randint(256, (32,))
    opt.zero_grad()
    F.cross_entropy(model(concept_tokens[batch]), concept_y[batch]).backward()
    embed.weight.grad[keep] = 0                                     # "freeze" the pretrained rows
    opt.step()
__RESTORE__
val_x, val_y = sentences(400, seed=2)
model.eval()
with torch.no_grad():
    acc = (model(encode(val_x)).argmax(1) == val_y).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RESTORE__", "" if bug else
                           "    with torch.no_grad():\n        embed.weight[keep] = orig[keep]\n")
