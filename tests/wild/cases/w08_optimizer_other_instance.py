"""The optimizer holds the parameters of a different model instance than the one trained.

Source: spro/practical-pytorch#9 (https://github.com/spro/practical-pytorch/issues/9): the
char-RNN tutorial instantiated the model twice, once before building the optimizer and again
before the training loop, so ``optimizer.step()`` updated the first instance while the second
was trained -- "loss is big, and loss flow up and down, do not diminish".  The trained model gets
gradients, the optimizer steps another set of weights.
"""

from tests.wild.cases.common import SETUP, loop

SLUGS = ("optimizer-not-on-model", "params-not-optimized", "params-not-updating")
MECHANISM = "optimizer-other-model"


def script(bug: bool) -> str:
    setup = SETUP
    if bug:
        setup = SETUP.replace("loss_fn = nn.CrossEntropyLoss()", "loss_fn = nn.CrossEntropyLoss()\nmodel = Net()  # rebuilt")
    return loop(setup=setup)
