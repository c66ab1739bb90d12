"""A model with tied input and output embeddings loaded with ``load_state_dict(..., assign=True)`` from a
checkpoint that holds the shared weight under one name only: ``assign=True`` replaces the embedding's parameter
object and leaves the output layer holding its fresh initial weights, so the loaded model predicts at chance --
with no error (``strict=False`` accepts the missing duplicate key).

Source: TransformerLensOrg/TransformerLens#1725 (https://github.com/TransformerLensOrg/TransformerLens/issues/1725),
"TransformerBridge.load_state_dict(assign=True) desyncs tied embed/unembed weights, silently breaking forward
pass": "PyTorch's ``assign=True`` replaces each target parameter object independently per key, so loading only
one of the two tied keys (e.g. just ``embed.weight``, a completely ordinary partial/fine-tuned checkpoint) leaves
the other holding stale pre-load data with no error or warning ... ``UnembeddingBridge.forward()`` reads ... the
now-desynced, stale ``lm_head`` weight" (the reporter's reproduction; closed). Here a small tied-embedding model
learns a next-token map, its state dict is saved without the duplicate ``unembed.weight`` key (as safetensors
does for shared tensors) and loaded into a fresh model with ``strict=False``; the bug loads with
``assign=True``, the twin with the default in-place copy. The reproduction replaces GPT-2 and the bridge by the
small model.

Metric: the loaded model's next-token accuracy (plain ``python``, CPU, seed 0): bug 0.0312, twin 1.0000
"""

REPORT = "N326"
MECHANISM = "tied-weights-untied-by-assign-load"
SLUGS = ()
METRIC = ("loaded_next_token_accuracy", 0.0312, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, D = 32, 32
perm = torch.randperm(V)


class TiedLM(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(V, D)
        self.hidden = nn.Linear(D, D)
        self.unembed = nn.Linear(D, V, bias=False)
        self.unembed.weight = self.embed.weight

    def forward(self, t):
        return self.unembed(torch.tanh(self.hidden(self.embed(t))))


model = TiedLM()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
#@guard
for step in range(300):
    t = torch.randint(0, V, (64,))
    loss = F.cross_entropy(model(t), perm[t])
    opt.zero_grad()
    loss.backward()
    opt.step()
ckpt = {k: v.clone() for k, v in model.state_dict().items() if k != "unembed.weight"}
fresh = TiedLM()
__LOAD__
with torch.no_grad():
    t = torch.arange(V)
    acc = (fresh(t).argmax(1) == perm[t]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__LOAD__', "fresh.load_state_dict(ckpt, strict=False, assign=True)" if bug
                           else "fresh.load_state_dict(ckpt, strict=False)")
