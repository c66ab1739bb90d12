"""Fine-tuning data truncated from the right after the labels were built: when a prompt is long
the completion is cut off, every label of the example is the ignore index, and the example trains
nothing, silently, while the loss stays finite thanks to the other examples of its batch.

Source: huggingface/trl#6668 (https://github.com/huggingface/trl/issues/6668), "SFTTrainer reports
loss 0.0 when every label in the batch is masked": "with prompt-completion data and
`completion_only_loss=True`, only completion tokens carry labels, so a `max_length` that cuts the
sequence before any completion token survives leaves every label at `-100`"; also
huggingface/trl#6320 ("the silent zero-loss footgun").  Here a topic classifier is fine-tuned on
prompt + separator + answer token sequences of at most 12 tokens; two of the four topics come with
long prompts.  The buggy collator keeps the first 12 tokens, the twin the last 12 (left truncation,
which keeps the completion).

Metric: validation accuracy (plain ``python``, CPU, seed 0): bug 0.505, twin 0.9875.
"""

from tests.wild.cases.common import TEXT

REPORT = "N48"
MECHANISM = "labels-truncated-away"
SLUGS = ()
METRIC = ("val_accuracy", 0.505, 0.9875)

_SCRIPT = TEXT + '''
PAD, MAX_LEN, IGNORE = 0, 12, -100
INDEX = {w: i + 1 for i, w in enumerate(WORDS)}
SEP = len(WORDS) + 1
ANSWER = SEP + 1                                                   # answer tokens ANSWER + class
TRUNCATION = "__SIDE__"


def prompts(n, seed):
    """Topics 0 and 1 come with long prompts (12-16 words), topics 2 and 3 with short ones."""
    rng = random.Random(seed)
    out, labels = [], []
    for _ in range(n):
        c = rng.randrange(4)
        n_filler = rng.randint(10, 14) if c < 2 else rng.randint(2, 6)
        words = rng.sample(FILLER, n_filler) + rng.sample(KEYWORDS[c], 2)
        rng.shuffle(words)
        out.append(words)
        labels.append(c)
    return out, labels


def tokenize(words, c):
    ids = [INDEX[w] for w in words] + [SEP, ANSWER + c]
    labels = [IGNORE] * (len(words) + 1) + [c]                     # completion-only loss
    if len(ids) > MAX_LEN:
        keep = slice(0, MAX_LEN) if TRUNCATION == "right" else slice(len(ids) - MAX_LEN, len(ids))
        ids, labels = ids[keep], labels[keep]
    prompt = [i for i in ids if i < SEP]
    label = next((lab for lab in labels if lab != IGNORE), IGNORE)
    return prompt + [PAD] * (MAX_LEN - len(prompt)), label


def encode(batch, classes):
    pairs = [tokenize(w, c) for w, c in zip(batch, classes)]
    return torch.tensor([p for p, _ in pairs]), torch.tensor([lab for _, lab in pairs])


model = nn.Sequential(nn.EmbeddingBag(SEP, 32, mode="mean", padding_idx=PAD), nn.Linear(32, 4))
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
train_x, train_c = prompts(1600, seed=1)
tokens, labels = encode(train_x, train_c)
print(f"training examples with no label left: {(labels == IGNORE).sum().item()} of {len(labels)}")
loader = DataLoader(TensorDataset(tokens, labels), batch_size=32, shuffle=True)
for epoch in range(3):
    for xb, yb in loader:
        opt.zero_grad()
        loss = F.cross_entropy(model(xb), yb, ignore_index=IGNORE)
        loss.backward()
        opt.step()

val_x, val_c = prompts(400, seed=2)
val_tokens, _ = encode(val_x, val_c)
model.eval()
with torch.no_grad():
    acc = (model(val_tokens).argmax(1) == torch.tensor(val_c)).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__SIDE__", "right" if bug else "left")
