"""Labels shifted by the user for a causal language model whose loss already shifts them: the
model is trained to predict the token after next.

Source: huggingface/transformers#44642 (https://github.com/huggingface/transformers/pull/44642):
the docstring now says causal LM models shift labels internally because this "has tripped up a
lot of users who pre-shift their labels and end up training next-next-token prediction by
accident" (InternLM/InternLM#318 asks the same of a fine-tuning script that shifted labels in the
dataset and again in the loss).  Here a tiny GRU language model with the Hugging Face loss
convention on sequences from a Markov chain; the twin passes ``labels=input_ids``.

Metric: next-token accuracy on held-out sequences (plain ``python``, CPU, seed 0):
bug 0.0115, twin 0.9091.
"""

from tests.wild.cases.common import TEXT

REPORT = "N16"
MECHANISM = "labels-shifted-twice"
SLUGS = ()
METRIC = ("next_token_accuracy", 0.0115, 0.9091)

_TAIL = '''
V, T = 8, 24


def chain(n, seed):
    g = torch.Generator().manual_seed(seed)
    seq = torch.zeros(n, T, dtype=torch.long)
    seq[:, 0] = torch.randint(V, (n,), generator=g)
    for t in range(1, T):
        step = (seq[:, t - 1] * 3 + 1) % V
        noise = torch.rand(n, generator=g) < 0.1
        seq[:, t] = torch.where(noise, torch.randint(V, (n,), generator=g), step)
    return seq


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, 32)
        self.gru = nn.GRU(32, 64, batch_first=True)
        self.lm_head = nn.Linear(64, V)

    def forward(self, input_ids, labels=None):
        logits = self.lm_head(self.gru(self.embed(input_ids))[0])
        loss = None
        if labels is not None:  # shift so that tokens < n predict n, as the library does
            loss = F.cross_entropy(logits[:, :-1].reshape(-1, V), labels[:, 1:].reshape(-1), ignore_index=-100)
        return loss, logits


train, val = chain(1000, 1), chain(200, 2)
model = TinyLM()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for epoch in range(3):
    for (ids,) in DataLoader(TensorDataset(train), batch_size=50, shuffle=True):
        labels = {labels}
        loss, _ = model(ids, labels=labels)
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    _, logits = model(val)
acc = (logits[:, :-1].argmax(-1) == val[:, 1:]).float().mean().item()
print(f"METRIC {{acc:.4f}}")
'''


def script(bug: bool) -> str:
    labels = ("torch.cat([ids[:, 1:], torch.full((len(ids), 1), -100)], 1)  # shifted for the model"
              if bug else "ids")
    return TEXT + _TAIL.format(labels=labels)
