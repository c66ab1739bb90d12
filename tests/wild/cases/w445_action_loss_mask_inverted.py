"""A loss mask inverted between observation and action tokens: in a trajectory of interleaved state and action
tokens the policy is trained on the action tokens only, and a mask that marks the states where it should mark the
actions trains the model to predict the environment's observations and never its own actions -- nothing fails,
the loss falls.

Source: mll-lab-nu/RAGEN#71 (https://github.com/mll-lab-nu/RAGEN/issues/71), "loss masking is completely broken":
"as mentioned in #62 , the state_mask is inverted. Right now the gradient is only passed to the states and not to
the actions, when it should be the other way around" (with a second problem, duplicated ``<start-state>`` tokens,
not reproduced here); maintainer: "Please check out the latest version, the problem have been fixed!". Here a GRU
policy is trained by behaviour cloning on trajectories ``state <sep> action`` in which the expert's four action
tokens are the four state tokens reversed, with the loss masked to the action tokens; the buggy run masks with the
state mask, the twin with the action mask. The reproduction replaces the repository's multi-turn LLM agent and
environments by a GRU on a synthetic single-turn task.

Metric: exact-match accuracy of greedy actions on held-out states (plain ``python``, CPU, seed 0):
bug 0.0000, twin 0.9820
"""

REPORT = "N419"
MECHANISM = "loss-mask-marks-observations-not-actions"
SLUGS = ()
METRIC = ("test_exact_match", 0.0, 0.982)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
SEP, VOCAB, K = 10, 11, 4
g = torch.Generator().manual_seed(0)
states = torch.randint(0, 10, (3000, K), generator=g)
trajs = torch.cat([states, torch.full((3000, 1), SEP), states.flip(1)], dim=1)   # state <sep> action
action_mask = torch.zeros_like(trajs, dtype=torch.float)
action_mask[:, K + 1:] = 1.0
state_mask = 1.0 - action_mask
train, test = trajs[:2500], trajs[2500:]


class Policy(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 128, batch_first=True)
        self.out = nn.Linear(128, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h)


model = Policy()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(12):
    perm = torch.randperm(len(train))
    for i in range(0, len(train), 64):
        b = perm[i:i + 64]
        x = train[b]
        __MASK__
        logits = model(x[:, :-1])
        token_loss = F.cross_entropy(logits.reshape(-1, VOCAB), x[:, 1:].reshape(-1), reduction="none")
        loss_mask = mask[:, 1:].reshape(-1)
        loss = (token_loss * loss_mask).sum() / loss_mask.sum()
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

_BUG = "mask = state_mask[b]"
_FIX = "mask = action_mask[b]"


def script(bug: bool) -> str:
    return _SCRIPT.replace("__MASK__", _BUG if bug else _FIX)
