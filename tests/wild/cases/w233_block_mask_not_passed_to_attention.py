"""A transformer block that receives the block-diagonal attention mask of a packed multi-image sequence and
never passes it to its attention: when several images share one sequence, every patch attends to the patches
of the other images, so each image's features depend on its neighbours in the pack -- with no error.

Source: mistralai/mistral-inference#218 (https://github.com/mistralai/mistral-inference/pull/218), "[fix]
Correctly pass mask in TransformerBlock.forward in transformer_layers.py": "The attention mask was not passed
correctly to the `Attention` in `TransformerBlock.forward`. One problem it caused was that when passing two
images in the image encoder, the attention would be done on all images at the same time, thus taking more
resources and returning an incorrect result ... ImageNet KNN: was 7.27% accuracy and took 5h - now is 63.79%
accuracy"; a second user: "I observed the same bug, this PR fixes the bug".  Here a small patch transformer
(2x2 patches of scikit-learn's 8x8 digits, a ``TransformerBlock`` taking ``(x, mask)``) is trained one image
per sequence, where the mask blocks nothing, and evaluated as the report's encoder is used, eight images
packed into one sequence with a block-diagonal mask.  The buggy block calls ``self.attn(h, h, h)``, the
twin ``self.attn(h, h, h, attn_mask=mask)``.

Metric: test accuracy of the packed evaluation (plain ``python``, CPU, seed 0): bug 0.1429, twin 0.8393
"""

REPORT = "N207"
MECHANISM = "attention-mask-argument-not-forwarded"
SLUGS = ()
METRIC = ("packed_test_accuracy", 0.1429, 0.8393)

_SCRIPT = '''
import torch
from torch import nn
import torch.nn.functional as F
from sklearn.datasets import load_digits

torch.manual_seed(0)
d = load_digits()
X = torch.tensor(d.images, dtype=torch.float32) / 16.0
Y = torch.tensor(d.target)
P, D = 16, 48  # 16 patches of 2x2 per image


def patches(imgs):
    return imgs.unfold(1, 2, 2).unfold(2, 2, 2).reshape(len(imgs), P, 4)


def block_mask(n_images):
    owner = torch.arange(n_images).repeat_interleave(P)
    return owner[:, None] != owner[None, :]  # True: not allowed to attend


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(D), nn.LayerNorm(D)
        self.attn = nn.MultiheadAttention(D, 4, batch_first=True)
        self.mlp = nn.Sequential(nn.Linear(D, 2 * D), nn.GELU(), nn.Linear(2 * D, D))

    def forward(self, x, mask):
        h = self.norm1(x)
        __ATTN__
        x = x + a
        return x + self.mlp(self.norm2(x))


class Encoder(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(4, D)
        self.pos = nn.Parameter(torch.zeros(P, D))
        self.blocks = nn.ModuleList(TransformerBlock() for _ in range(2))
        self.head = nn.Linear(D, 10)

    def forward(self, imgs, packed=True):
        """``packed``: all images in one sequence, as the report's encoder handles several images; otherwise
        one image per sequence."""
        n = len(imgs)
        x = self.embed(patches(imgs)) + self.pos
        x, mask = (x.reshape(1, n * P, D), block_mask(n)) if packed else (x, block_mask(1))
        for blk in self.blocks:
            x = blk(x, mask)
        return self.head(x.reshape(n, P, D).mean(1))


model = Encoder()
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
#@guard
for epoch in range(12):
    perm = torch.randperm(1400)
    for i in range(0, 1400, 32):
        b = perm[i:i + 32]
        loss = F.cross_entropy(model(X[b], packed=False), Y[b])  # one image per sequence in training
        opt.zero_grad()
        loss.backward()
        opt.step()

correct = 0
with torch.no_grad():
    for i in range(1400, 1792, 8):
        correct += (model(X[i:i + 8]).argmax(1) == Y[i:i + 8]).sum().item()
print(f"METRIC {correct / 392:.4f}")
'''


def script(bug: bool) -> str:
    attn = "a, _ = self.attn(h, h, h)" if bug else "a, _ = self.attn(h, h, h, attn_mask=mask)"
    return _SCRIPT.replace("__ATTN__", attn)
