"""``model.eval()`` before validation and no ``model.train()`` after it: from epoch 2 on,
training runs with dropout off and BatchNorm statistics frozen.

Source: tk-rusch/coRNN#1 (https://github.com/tk-rusch/coRNN/issues/1, "model.train() isn't called
again after model.eval()") and wkentaro/pytorch-fcn#57 (https://github.com/wkentaro/pytorch-fcn/issues/57:
the training loss jumps at each new epoch because validation left the model in eval mode).
"""

from tests.wild.cases.common import EVALUATE, loop

SLUGS = ("eval-mode-in-train",)


def script(bug: bool) -> str:
    return loop(evaluate=EVALUATE.replace("    model.train()\n", "") if bug else EVALUATE)
