"""``model.eval()`` before validation and no ``model.train()`` after it: from epoch 2 on,
training runs with dropout off and BatchNorm statistics frozen.

Source: PyTorch forums, "Model.train() and model.eval() vs model and model.eval()"
(https://discuss.pytorch.org/t/model-train-and-model-eval-vs-model-and-model-eval/5744), and
pytorch/examples' early word_language_model which switched to eval() in evaluate() and relied
on train() at the top of each epoch -- forgetting that call is the bug.
"""

from tests.wild.cases.common import EVALUATE, loop

SLUGS = ("eval-mode-in-train",)


def script(bug: bool) -> str:
    return loop(evaluate=EVALUATE.replace("    model.train()\n", "") if bug else EVALUATE)
