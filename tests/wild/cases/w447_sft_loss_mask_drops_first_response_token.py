"""A supervised fine-tuning loss mask shifted by one: the mask marks the response tokens of the input, and the
logits at position ``t`` predict token ``t + 1``, so the mask over the predictions must be the input mask shifted
left (``mask[:, 1:]``); taken as ``mask[:, :-1]`` it drops the prediction of the first response token, which is
never trained -- nothing fails, the loss falls, and the model starts every answer with an untrained token.

Source: verl-project/verl#3287 (https://github.com/verl-project/verl/pull/3287), "[trainer] fix: Correct
off-by-one error in SFT loss mask slicing": "This PR fixes the SFT loss mask, which always masked the first
generated token and would lead to the SFTed model behaving as generating the wrong first token" (merged; verified
by the author "with an overfitting experiment"). Here a GRU language model is fine-tuned on sequences ``prompt
<sep> response`` where the response is the prompt's four digits reversed, with the loss masked to the response;
the buggy run slices the input's response mask as ``[:, :-1]``, the twin as ``[:, 1:]``. The reproduction replaces
the repository's transformer and chat data by a GRU on a synthetic reversal task.

Metric: exact-match accuracy of greedy responses on held-out prompts (plain ``python``, CPU, seed 0):
bug 0.1460, twin 0.9820
"""

REPORT = "N421"
MECHANISM = "sft-loss-mask-drops-first-response-token"
SLUGS = ()
METRIC = ("test_exact_match", 0.146, 0.982)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
SEP, VOCAB, K = 10, 11, 4
g = torch.Generator().manual_seed(0)
prompts = torch.randint(0, 10, (3000, K), generator=g)
seqs = torch.cat([prompts, torch.full((3000, 1), SEP), prompts.flip(1)], dim=1)   # prompt <sep> response
response_mask = torch.zeros_like(seqs, dtype=torch.float)
response_mask[:, K + 1:] = 1.0
train, test = seqs[:2500], seqs[2500:]
train_mask = response_mask[:2500]


class LM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 128, batch_first=True)
        self.out = nn.Linear(128, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


model = LM()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(12):
    perm = torch.randperm(len(train))
    for i in range(0, len(train), 64):
        b = perm[i:i + 64]
        x, mask = train[b], train_mask[b]
        logits = model(x[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none")
        __MASK__
        loss = (token_loss * loss_mask.reshape(-1)).sum() / loss_mask.sum()
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
with torch.no_grad():
    ctx = test[:, :K + 1]
    for _ in range(K):
        nxt = model(ctx)[:, -1].argmax(-1, keepdim=True)
        ctx = torch.cat([ctx, nxt], dim=1)
    exact = (ctx[:, K + 1:] == test[:, K + 1:]).all(1).float().mean().item()
print(f"METRIC {exact:.4f}")
'''

_BUG = "loss_mask = mask[:, :-1]"
_FIX = "loss_mask = mask[:, 1:]"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", _BUG if bug else _FIX)
