"""transform-over-batch-axis (issue 33; tests/wild w175): a flip, rotation or roll with the default axes
of one image or matrix applied to a batch, in forms other than the wild case's test-time fliplr --
a tensor method in a training augmentation, torch.roll without dims through overt.Trainer's forward,
torch.rot90 without dims under overt run -- each beside its twin that names the axes, and the correct
forms that share the functions (a per-sample transform before stacking, explicit axes, a result
mixed before the model) silent.  Real small runs on the digits."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _images() -> tuple[torch.Tensor, torch.Tensor]:
    x, y = digits()
    return x.reshape(-1, 8, 8), y


def _mlp() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Flatten(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def _train_and_tta(augment, mirror, steps: int = 6) -> tuple[list, str]:
    """Training with ``augment(batch, step)``, then test-time augmentation with ``mirror(batch)``."""
    x, y = _images()
    model = _mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(steps):
        xb, yb = x[64 * i:64 * (i + 1)], y[64 * i:64 * (i + 1)]
        loss = F.cross_entropy(model(augment(xb, i)), yb)
        opt.zero_grad()
        loss.backward()
        opt.step()
    model.eval()
    with torch.no_grad():
        xv = x[1400:]
        (model(xv) + model(mirror(xv))).argmax(1)
    return g.report(), g.session.options.stream.getvalue()


def _same(xb, i):
    return xb


def test_fliplr_in_test_time_augmentation_is_named_at_its_line():
    findings, text = _train_and_tta(_same, lambda xv: torch.fliplr(xv))
    assert slugs(findings) == ["transform-over-batch-axis"], text
    assert "torch.fliplr call at tests/guards/test_axisflip.py:" in text and "[397, 8, 8]" in text, text
    assert "x.flip(-1)" in text


def test_the_tensor_method_in_a_training_augmentation_is_named():
    findings, text = _train_and_tta(lambda xb, i: xb.fliplr() if i % 2 else xb, lambda xv: xv.flip(-1))
    assert slugs(findings) == ["transform-over-batch-axis"], text
    assert "torch.fliplr call at" in text and "[64, 8, 8]" in text, text


@pytest.mark.parametrize("augment,mirror", [
    (_same, lambda xv: xv.flip(-1)),
    (lambda xb, i: torch.stack([s.fliplr() for s in xb]) if i % 2 else xb, lambda xv: torch.rot90(xv, 1, (1, 2))),
    (lambda xb, i: torch.roll(xb, 1, -1), lambda xv: 0.5 * (xv + torch.fliplr(xv))),
], ids=["flip-last", "per-sample-fliplr-and-rot90-dims", "roll-dims-and-mixed"])
def test_named_axes_and_per_sample_transforms_are_silent(augment, mirror):
    findings, text = _train_and_tta(augment, mirror)
    assert "transform-over-batch-axis" not in slugs(findings), text


def test_fliplr_reversing_a_batch_of_sequences_in_time_is_silent():
    """(N, T, F) with T != F: fliplr reverses axis 1, the time, as a backward reader means it."""
    torch.manual_seed(0)
    x, y = digits()
    seq = x[:384].reshape(-1, 16, 4)  # 16 steps of 4 pixels each
    rnn, head = nn.GRU(4, 16, batch_first=True), nn.Linear(32, 10)

    class Both(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = rnn, head

        def forward(self, s):
            return self.head(torch.cat([self.rnn(s)[0][:, -1], self.rnn(torch.fliplr(s))[0][:, -1]], 1))

    model = Both()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(6):
        loss = F.cross_entropy(model(torch.fliplr(seq[64 * i:64 * (i + 1)])), y[64 * i:64 * (i + 1)])
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert "transform-over-batch-axis" not in slugs(g.report()), g.session.options.stream.getvalue()


@pytest.mark.parametrize("dims", [None, 1], ids=["flattened", "twin"])
def test_the_engine_names_a_roll_without_dims_in_its_forward(dims, tmp_path, capsys):
    from torch.utils.data import TensorDataset

    from overt import Trainer

    x, y = digits()

    def forward(model, batch):  # a random-shift augmentation of each sample's 64 pixels
        xb, yb = batch
        shifted = torch.roll(xb, 3) if dims is None else torch.roll(xb, 3, dims)
        return model(shifted), yb

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=1e-3), nn.CrossEntropyLoss(),
                      TensorDataset(x[:640], y[:640]), run_dir=tmp_path / "run", epochs=1, batch_size=64,
                      progress="off", tensorboard=False, checkpoint=False, guards=True, forward=forward)
    summary = trainer.fit()
    err = capsys.readouterr().err
    if dims is None:
        assert "transform-over-batch-axis" in str(summary) and "torch.roll call at" in err, err
    else:
        assert "transform-over-batch-axis" not in str(summary) + err, err


_SCRIPT = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    torch.manual_seed(0)
    d = load_digits()
    x = torch.tensor(d.images[:512], dtype=torch.float32) / 16.0  # (N, 8, 8)
    y = torch.tensor(d.target[:512])
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for i in range(0, 512, 8):  # batches of 8 images of 8x8: a rotation of axes 0 and 1 keeps the shape
        xb = x[i:i + 8]
        if i % 16:
            xb = __ROTATE__  # rotation augmentation
        loss = F.cross_entropy(model(xb), y[i:i + 8])
        opt.zero_grad()
        loss.backward()
        opt.step()
    print("done")
''')


@pytest.mark.slow  # a subprocess each, ~13 s on the shared machine
@pytest.mark.parametrize("rotate", ["torch.rot90(xb)", "torch.rot90(xb, 1, (1, 2))"], ids=["default-dims", "twin"])
def test_overt_run_names_rot90_without_dims(rotate, tmp_path):
    script = tmp_path / "rotate.py"
    script.write_text(_SCRIPT.replace("__ROTATE__", rotate))
    out = subprocess.run([sys.executable, "-m", "overt", "run", str(script)], capture_output=True, text=True,
                         timeout=240, cwd=tmp_path)
    text = out.stdout + out.stderr
    if rotate == "torch.rot90(xb)":
        assert "transform-over-batch-axis" in text and "torch.rot90 call at rotate.py:" in text, text
    else:
        assert out.returncode == 0 and "transform-over-batch-axis" not in text, text
