"""A constant tensor (a feature mask) kept as a plain attribute of the module, not a buffer.

Source: Lightning-AI/pytorch-lightning#3674 (https://github.com/Lightning-AI/pytorch-lightning/issues/3674,
"Tensor is not moved to the expected device") and OpenNMT/OpenNMT-py#240
(https://github.com/OpenNMT/OpenNMT-py/pull/240, "Make mask a buffer"):
a plain tensor attribute is not moved by ``model.to(device)`` (a device mismatch on GPU) and is
not in ``state_dict()``, so a reloaded model silently uses a fresh, different mask.  CPU: the mask
is random, so the reloaded model's predictions differ from the trained one's.
"""

from tests.wild.cases.common import loop

SLUGS = ("unregistered-tensor",)

_NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        mask = (torch.rand(64) > 0.1).float()
        {keep}
        self.fc1 = nn.Linear(64, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x * self.mask)))
'''


def script(bug: bool) -> str:
    keep = "self.mask = mask" if bug else "self.register_buffer('mask', mask)"
    return loop(net=_NET.replace("{keep}", keep))
