"""Hidden layers kept in a plain Python list: the optimizer never sees them.

Source: pytorch/pytorch#666 (https://github.com/pytorch/pytorch/issues/666, "nn.Module not importing
parameters contained in lists") and kymatio/murenn#42 (https://github.com/kymatio/murenn/issues/42) --
the layers in a list are missing from ``model.parameters()``, so they never train (and are not saved
or moved by ``.to()``).
"""

from tests.wild.cases.common import loop

SLUGS = ("unregistered-submodule",)

_NET = '''
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = {container}([nn.Linear(64, 64), nn.Linear(64, 64)])
        self.out = nn.Linear(64, 10)

    def forward(self, x):
        for layer in self.hidden:
            x = F.relu(layer(x))
        return self.out(x)
'''


def script(bug: bool) -> str:
    return loop(net=_NET.format(container="list" if bug else "nn.ModuleList"))
