"""Supervised fine-tuning that drops the conversation's loss mask: every token, the user's prompt
included, becomes a target, the random prompt digits (which no model can predict) swamp the two
reply tokens in the mean loss, and the small model learns the replies far more slowly -- with no
error and a loss that still falls.

Source: karpathy/nanochat#582 (https://github.com/karpathy/nanochat/pull/582), "Restore completion-only
loss masking in SFT dataloader": "the loss mask from tokenizer.render_conversation() was accidentally
dropped: ``ids, _ = tokenizer.render_conversation(conversation)  # mask discarded`` This causes all
tokens - user prompts, BOS, special tokens, tool outputs to contribute to the cross-entropy loss"
(merged; ChatCORE 0.315 without the mask, 0.355 with it).  Here a GRU language model is fine-tuned on
conversations whose user turn is twelve random digits and whose assistant reply repeats the first and
the middle digit; the loss ignores every position the mask leaves out.  The buggy script's renderer
returns an all-ones mask (the real one discarded), the twin the conversation's mask.

Metric: reply-token accuracy on held-out conversations (plain ``python``, CPU, seed 0): bug 0.5275,
twin 1.0
"""

REPORT = "N156"
MECHANISM = "loss-mask-discarded"
SLUGS = ()
METRIC = ("val_reply_accuracy", 0.5275, 1.0)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
VOCAB, SEP, PROMPT = 12, 10, 12  # digits 0-9, a separator, and a pad that is never used


def conversations(n):
    """A user turn of random digits, a separator, and the assistant's two-token reply: the first digit
    and the middle digit of the prompt."""
    prompt = torch.randint(0, 10, (n, PROMPT), generator=g)
    reply = torch.stack([prompt[:, 0], prompt[:, PROMPT // 2]], 1)
    ids = torch.cat([prompt, torch.full((n, 1), SEP), reply], 1)
    mask = torch.zeros_like(ids)
    mask[:, PROMPT + 1:] = 1  # only the assistant's tokens are supervised
    return ids, mask


class TinyLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 32)
        self.rnn = nn.GRU(32, 128, batch_first=True)
        self.head = nn.Linear(128, VOCAB)

    def forward(self, ids):
        return self.head(self.rnn(self.emb(ids))[0])


def render(ids, mask):
    return __RENDER__


train_ids, train_mask = conversations(4000)
val_ids, val_mask = conversations(1000)
model = TinyLM()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(4):
    for i in range(0, 4000, 64):
        ids, mask = render(train_ids[i:i + 64], train_mask[i:i + 64])
        logits = model(ids[:, :-1])
        targets = ids[:, 1:].masked_fill(mask[:, 1:] == 0, -100)
        loss = F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1), ignore_index=-100)
        opt.zero_grad()
        loss.backward()
        opt.step()

with torch.no_grad():  # the reply tokens, predicted with teacher forcing
    pred = model(val_ids[:, :-1]).argmax(-1)[:, PROMPT:]
    acc = (pred == val_ids[:, PROMPT + 1:]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__RENDER__", "ids, torch.ones_like(mask)" if bug else "ids, mask")
