"""graph-in-eval and train-mode-in-eval on an evaluation function that *builds* its model from a class imported
from another file of the project (``from model import UNet``; ``model = UNet(...)``), then hands it to a helper
that switches it to eval mode and runs it under ``torch.no_grad()``.  The construction is no run of a model: the
evaluation's first model call is the helper's, and the helper is clean (pytorch-ddpm's ``eval()``, fresh10-dev).
Its buggy twin, the same function running the model it built without ``no_grad``, is still reported, at the
run's line.  (Whether such a model is still in training mode is not seen, before this change as after it: the
mode of a model built from an imported class is unknown to train-mode-in-eval, which stays silent.)"""

from __future__ import annotations

from pathlib import Path

from overt.lint import lint_paths
from overt.lint.config import LintConfig

NET = '''import torch.nn as nn


class UNet(nn.Module):
    def __init__(self, ch):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, ch, 3), nn.BatchNorm2d(ch), nn.Dropout(0.1))

    def forward(self, x):
        return self.body(x)
'''

HELPER = '''import torch
from model import UNet


def generate(net, n):
    net.eval()
    with torch.no_grad():
        out = net(torch.randn(n, 3, 8, 8))
    net.train()
    return out


def train(steps):
    net = UNet(ch=8)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    for _ in range(steps):
        loss = net(torch.randn(2, 3, 8, 8)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    torch.save(net.state_dict(), "ckpt.pt")

'''

CLEAN = HELPER + '''
def eval():
    model = UNet(ch=8)
    model.load_state_dict(torch.load("ckpt.pt", weights_only=True))
    return generate(model, 4)


if __name__ == "__main__":
    train(2)
    eval()
'''

NO_GRAD_MISSING = HELPER + '''
def eval():
    model = UNet(ch=8)
    model.load_state_dict(torch.load("ckpt.pt", weights_only=True))
    model.eval()
    for _ in range(3):
        out = model(torch.randn(4, 3, 8, 8))
    return out


if __name__ == "__main__":
    train(2)
    eval()
'''

def _lint(root: Path, main: str) -> list[tuple[str, int]]:
    (root / ".git").mkdir()
    (root / "model.py").write_text(NET)
    (root / "main.py").write_text(main)
    found, errors = lint_paths([root], LintConfig(root=root))
    assert not errors
    return sorted((f.slug, f.line) for f in found if f.slug in ("graph-in-eval", "train-mode-in-eval"))


def _line(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.splitlines(), 1) if needle in ln)


def test_building_the_model_from_an_imported_class_is_no_run(tmp_path):
    assert _lint(tmp_path, CLEAN) == []


def test_running_it_with_autograd_on_is_still_reported(tmp_path):
    line = _line(NO_GRAD_MISSING, "out = model(")
    assert _lint(tmp_path, NO_GRAD_MISSING) == [("graph-in-eval", line)]


def test_a_library_class_built_in_evaluation_is_no_run_either(tmp_path):
    text = CLEAN.replace("from model import UNet", "from model import UNet\nfrom diffusers import UNet2DModel").replace(
        "    model = UNet(ch=8)\n    model.load_state_dict", "    model = UNet2DModel(sample_size=8)\n    model.load_state_dict")
    assert _lint(tmp_path, text) == []
