"""Validation with neither ``model.eval()`` nor ``torch.no_grad()``: the beginner's bug.

Source: PyTorch forums, "'model.eval()' vs 'with torch.no_grad()'"
(https://discuss.pytorch.org/t/model-eval-vs-with-torch-no-grad/19615): without eval() dropout
and BatchNorm keep their training behaviour in validation (and BatchNorm's running statistics
are updated by validation batches); without no_grad every validation forward builds a graph.
"""

from tests.wild.cases.common import loop

SLUGS = ("train-mode-in-eval", "graph-in-eval")

_BAD = '''
    correct = 0
    for xb, yb in val_loader:
        correct += (model(xb).argmax(1) == yb).sum().item()
    print(f"epoch {epoch}: val accuracy {correct / len(val_ds):.3f}")
'''


def script(bug: bool) -> str:
    return loop(evaluate=_BAD) if bug else loop()
