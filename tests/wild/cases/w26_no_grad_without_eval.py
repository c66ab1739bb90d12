"""Validation under ``torch.no_grad()`` but without ``model.eval()``: dropout still active.

Source: PyTorch forums, "'model.eval()' vs 'with torch.no_grad()'"
(https://discuss.pytorch.org/t/model-eval-vs-with-torch-no-grad/19615): no_grad only stops the
graph; dropout and BatchNorm still behave as in training, so validation metrics are noisy.
"""

from tests.wild.cases.common import EVALUATE, loop

SLUGS = ("train-mode-in-eval",)


def script(bug: bool) -> str:
    evaluate = EVALUATE.replace("    model.eval()\n", "").replace("    model.train()\n", "") if bug else EVALUATE
    return loop(evaluate=evaluate)
