"""A rotary embedding that caches its rotation frequencies under a key made of the sequence length only: in cached
(incremental) decoding every new token is a sequence of length one at a new offset, but the first call's
frequencies are returned for all of them, so each new query and key is rotated as if it stood at the first
decoding position and the attention loses every relative position -- with no error.

Source: lucidrains/rotary-embedding-torch#11 (https://github.com/lucidrains/rotary-embedding-torch/issues/11), "Bug
in cache": ``freqs = self.forward(lambda: self.get_seq_pos(seq_len, ..., offset = offset), cache_key =
f'freqs:{seq_len}')`` -- "offset parameter is not being cached. So if I pass the same t with different offsets I
get the same result as in first offset. Key should be ``cache_key = f'freqs:{seq_len};offset:{offset}'``";
maintainer: "oh yes, good catch! thank you for finding this!". Here a one-layer causal attention model with a
rotary embedding written like the library's (frequencies computed by a callable and cached by key) learns to
output the token three places back, trained on whole sequences (offset 0); it is then run token by token with a
key/value cache, each new token rotated at ``offset = t``. The bug keys the cache by the length only, the twin by
length and offset. The reproduction replaces a language model's generation by this copying task.

Metric: accuracy of cached incremental decoding on held-out sequences (plain ``python``, CPU, seed 0): bug 0.1310,
twin 1.0000
"""

REPORT = "N310"
MECHANISM = "rotary-cache-keyed-without-offset"
SLUGS = ()
METRIC = ("cached_decoding_accuracy", 0.1310, 1.0000)

_SCRIPT = '''import torch
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
V, T, D, LAG = 16, 24, 32, 3


class RotaryEmbedding(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.register_buffer("inv_freq", 1.0 / (100 ** (torch.arange(0, dim, 2).float() / dim)))
        self.cache = {}

    def forward(self, get_pos, cache_key):
        if cache_key in self.cache:
            return self.cache[cache_key]
        freqs = get_pos()[:, None] * self.inv_freq[None, :]
        freqs = torch.cat([freqs, freqs], dim=-1)
        self.cache[cache_key] = freqs
        return freqs

    def rotate_queries_or_keys(self, t, offset=0):
        seq_len = t.shape[-2]
        freqs = self.forward(lambda: torch.arange(seq_len).float() + offset, cache_key=__KEY__)
        t1, t2 = t.chunk(2, dim=-1)
        return t * freqs.cos() + torch.cat([-t2, t1], dim=-1) * freqs.sin()


class LagModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, D)
        self.q, self.k, self.v = nn.Linear(D, D), nn.Linear(D, D), nn.Linear(D, D)
        self.rotary = RotaryEmbedding(D)
        self.out = nn.Linear(D, V)

    def forward(self, tokens, cache=None, offset=0):
        h = self.emb(tokens)
        q = self.rotary.rotate_queries_or_keys(self.q(h), offset=offset)
        k = self.rotary.rotate_queries_or_keys(self.k(h), offset=offset)
        v = self.v(h)
        if cache is not None:
            if "k" in cache:
                k, v = torch.cat([cache["k"], k], 1), torch.cat([cache["v"], v], 1)
            cache["k"], cache["v"] = k, v
            att = q @ k.transpose(1, 2) / D ** 0.5
        else:
            att = q @ k.transpose(1, 2) / D ** 0.5
            att = att.masked_fill(torch.ones(T, T).triu(1).bool(), float("-inf"))
        return self.out(att.softmax(-1) @ v)


model = LagModel()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for step in range(400):
    x = torch.randint(0, V, (64, T))
    logits = model(x)
    loss = F.cross_entropy(logits[:, LAG:].reshape(-1, V), x[:, :-LAG].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
with torch.no_grad():
    x = torch.randint(0, V, (256, T))
    cache, preds = {}, []
    for t in range(T):
        preds.append(model(x[:, t:t + 1], cache=cache, offset=t).argmax(-1))
    preds = torch.cat(preds, 1)
    acc = (preds[:, LAG:] == x[:, :-LAG]).float().mean().item()
print(f"METRIC {acc:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace('__KEY__', "f'freqs:{seq_len}'" if bug else "f'freqs:{seq_len};offset:{offset}'")
