"""The optimizer holds the parameters of a different model instance than the one trained.

Source: PyTorch forums, "Model parameters are not being updated"
(https://discuss.pytorch.org/t/model-parameters-are-not-being-updated/70452) and the many threads
like it where the model is re-created (``model = Net()`` again, or a copy is moved to the device
and trained) after ``optimizer = SGD(model.parameters())`` was built: the trained model gets
gradients, the optimizer steps another set of weights, and the loss stays flat.
"""

from tests.wild.cases.common import SETUP, loop

SLUGS = ("params-not-optimized", "params-not-updating", "optimizer-other-model")


def script(bug: bool) -> str:
    setup = SETUP
    if bug:
        setup = SETUP.replace("loss_fn = nn.CrossEntropyLoss()", "loss_fn = nn.CrossEntropyLoss()\nmodel = Net()  # rebuilt")
    return loop(setup=setup)
