"""A residual block whose branch opens with ``ReLU(inplace=True)``: the activation overwrites the block's input, so
``out += input`` adds the rectified input instead of the pre-activation one; the identity path drops every negative
value, and a stack of such blocks after a linear layer throws away half of what that layer computed -- nothing
fails.

Source: rosinality/vq-vae-2-pytorch#60 (https://github.com/rosinality/vq-vae-2-pytorch/issues/60), "ResBlock with
inplace relu?": "I think the point is to pass forward the pre-activation values from the previous layer as the
identity (the skip connection), rather than post-activation. However, since you have `inplace=True` for the start
ReLU, you actually end up getting the latter. Is that intentional or a bug?"; maintainer: "Oh...Definitely it is a
bug. Thank you! Fixed at ef5f67c." Here an autoencoder of the digits whose encoder ends, like the repository's, with
a linear layer followed by a stack of ``ResBlock``s (written like the repository's, with linear layers for
convolutions) and a 16-dimensional code is trained with Adam, and the reconstruction error of the test digits is
measured; the bug's first ReLU is in place, the twin's is not, as the fix made it. The reproduction replaces
convolutions, the quantiser and images by linear layers and the digits.

Metric: test reconstruction mean squared error (lower is better; plain ``python``, CPU, seed 0): bug 0.0136, twin
0.0112
"""

from tests.wild.cases.common import PRELUDE

REPORT = "N394"
MECHANISM = "inplace-relu-overwrites-skip-input"
SLUGS = ()
METRIC = ("test_reconstruction_mse", 0.0136, 0.0112)

_SCRIPT = PRELUDE + '''

class ResBlock(nn.Module):
    def __init__(self, channel):
        super().__init__()
        self.conv = nn.Sequential(
            nn.ReLU(inplace=__INPLACE__),
            nn.Linear(channel, channel),
            nn.ReLU(inplace=True),
            nn.Linear(channel, channel),
        )

    def forward(self, input):
        out = self.conv(input)
        out += input
        return out


encoder = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 16), ResBlock(16), ResBlock(16))
decoder = nn.Sequential(nn.Linear(16, 64), nn.ReLU(), nn.Linear(64, 64))
model = nn.Sequential(encoder, decoder)
opt = torch.optim.Adam(model.parameters(), lr=1e-3)
#@guard
for epoch in range(60):
    for i in torch.randperm(1400).split(64):
        loss = F.mse_loss(model(X[i]), X[i])
        opt.zero_grad()
        loss.backward()
        opt.step()
with torch.no_grad():
    mse = F.mse_loss(model(X[1400:]), X[1400:]).item()
print(f"METRIC {mse:.4f}")
'''


def script(bug: bool) -> str:
    return _SCRIPT.replace("__INPLACE__", "True" if bug else "False")
