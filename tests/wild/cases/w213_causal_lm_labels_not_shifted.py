"""A causal language-model loss computed against unshifted labels: position t is scored on the token it
already sees, so the model is trained (and, in the report, evaluated) on copying the current token rather
than predicting the next one -- with no error.

Source: macrocosm-os/pretraining#66 (https://github.com/macrocosm-os/pretraining/pull/66), "Standardize the
loss function": "I believe that the default modeling code of BartForCausalLM has a problem.
BartForCausalLM.forward has the following: `loss = None` `if labels is not None:` `labels =
labels.to(logits.device)` `loss_fct = CrossEntropyLoss()` `loss = loss_fct(logits.view(-1,
self.config.vocab_size), labels.view(-1))` i.e., the label is not shifted. This means that with the current
code, the model is not trained to predict the next token, but the current token." (merged; "thank you so
much for submitting this PR!").  Here a small GRU language model is trained on token sequences that follow
a fixed successor rule (with 10% random tokens) by passing ``labels = input_ids`` to a loss written like
``BartForCausalLM``'s; the twin's loss shifts logits and labels by one, as ``GPT2LMHeadModel`` does.

Metric: next-token accuracy on 200 held-out sequences (plain ``python``, CPU, seed 0): bug 0.0148, twin
0.9013
"""

REPORT = "N187"
MECHANISM = "causal-lm-labels-not-shifted"
SLUGS = ()
METRIC = ("val_next_token_accuracy", 0.0148, 0.9013)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
V, T = 50, 24
successor = torch.randperm(V, generator=g)


def sequences(n):
    """Each token is its predecessor's successor, except 10% random tokens."""
    seq = torch.zeros(n, T, dtype=torch.long)
    seq[:, 0] = torch.randint(0, V, (n,), generator=g)
    for t in range(1, T):
        noise = torch.rand(n, generator=g) < 0.1
        seq[:, t] = torch.where(noise, torch.randint(0, V, (n,), generator=g), successor[seq[:, t - 1]])
    return seq


class TinyCausalLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 64)
        self.rnn = nn.GRU(64, 64, batch_first=True)
        self.head = nn.Linear(64, V)

    def forward(self, input_ids, labels=None):
        hidden, _ = self.rnn(self.embed(input_ids))
        logits = self.head(hidden)
        loss = None
        if labels is not None:
__LOSS__
        return loss, logits


train = sequences(2000)
model = TinyCausalLM()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(4):
    perm = torch.randperm(2000)
    for i in range(0, 2000, 50):
        batch = train[perm[i:i + 50]]
        loss, _ = model(batch, labels=batch)
        opt.zero_grad()
        loss.backward()
        opt.step()

model.eval()
val = sequences(200)
with torch.no_grad():
    _, logits = model(val)
acc = (logits[:, :-1].argmax(-1) == val[:, 1:]).float().mean()
print(f"METRIC {acc:.4f}")
'''

_BUG = "            loss = F.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))"
_TWIN = "            loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1))"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__LOSS__", _BUG if bug else _TWIN)
