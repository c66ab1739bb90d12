"""What a script can observe of the guards, in process: nothing it would not see without them."""

from __future__ import annotations

import copy
import io
import pickle
import sys
import textwrap
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

import overt
from overt.guards import run_cli
from overt.guards.options import GuardOptions
from overt.guards.patches import ACTIVE
from overt.guards.session import GuardSession


def _model() -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))


def test_a_watched_module_pickles_and_deep_copies_without_the_guards_hooks():
    model = _model()
    session = GuardSession(GuardOptions(), auto=True)
    try:
        model(torch.randn(16, 4))  # discovered: the session's forward hooks are on it now
        assert model._forward_pre_hooks
        twin = copy.deepcopy(model)  # an EMA copy: no hook, no copy of the session
        assert not twin._forward_pre_hooks and not twin._forward_hooks
        buf = io.BytesIO()
        torch.save(model, buf)  # the whole module (pickles the hooks dict)
        buf.seek(0)
        back = torch.load(buf, weights_only=False)
        assert not back._forward_pre_hooks and torch.equal(back[0].weight, model[0].weight)
        assert model._forward_pre_hooks  # the live module keeps its hooks
    finally:
        session.close()
    assert pickle.loads(pickle.dumps(model))[0].weight.shape == (8, 4)


def test_a_loop_without_an_optimizer_goes_idle_after_the_warm_up_then_an_optimizer_wakes_it():
    model = _model()
    original = F.smooth_l1_loss
    session = GuardSession(GuardOptions(warmup_steps=3), auto=True)
    session.explain_loss_errors = False
    try:
        x, y = torch.randn(16, 4), torch.randn(16, 2)
        for _ in range(6):  # hand-written updates, as in pytorch/examples' regression
            model.zero_grad()
            F.smooth_l1_loss(model(x), y).backward()
            for p in model.parameters():
                p.data.add_(-0.1 * p.grad)
        assert not session.armed and session.unclocked
        assert F.smooth_l1_loss is original  # no loss wrapper, no forward hook between steps
        assert not model._forward_pre_hooks and session._global_pre is None
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            F.smooth_l1_loss(model(x), y).backward()
            opt.step()
        assert session.armed and not session.unclocked  # the clock runs: the warm-up steps are checked
    finally:
        session.close()
    assert not ACTIVE


def test_a_failing_loss_is_explained_and_the_traceback_is_the_scripts(tmp_path, capsys):
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent('''
        import torch
        from torch import nn
        model = nn.Linear(4, 3)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        x = torch.randn(8, 4)
        for step in range(20):
            y = torch.full((8,), 5 if step == 12 else 1)  # a label out of range, after the warm-up
            opt.zero_grad()
            nn.functional.cross_entropy(model(x), y).backward()
            opt.step()
    '''))
    saved = sys.argv[:], sys.path[0], sys.modules["__main__"]
    try:
        assert run_cli.main(["--report", str(tmp_path / "r.json"), str(script)]) == 1
    finally:
        sys.argv, sys.path[0], sys.modules["__main__"] = saved
    err = capsys.readouterr().err
    assert "label-out-of-range" in err and "train.py:10" in err
    traceback = err[err.index("Traceback"):]
    frames = [line for line in traceback.split("IndexError")[0].splitlines() if line.lstrip().startswith("File ")]
    packages = {str(Path(overt.__file__).parent), str(Path(overt.__file__).resolve().parent)}
    assert any(str(script) in line for line in frames), frames
    assert not any(package in line for line in frames for package in packages)  # no frame of overt's runner or wrappers


def test_torch_load_warnings_point_at_the_callers_line(tmp_path, monkeypatch):
    """TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD makes torch.load warn (stacklevel=2): at the caller's line,
    with or without the guards' torch.load wrapper (numpy data saved with torch.save loads then)."""
    import warnings

    import numpy as np

    path = tmp_path / "traindata.pt"
    torch.save(np.arange(6.0).reshape(2, 3), path)
    monkeypatch.setenv("TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD", "1")
    seen = []
    for guarded in (False, True):
        session = GuardSession(GuardOptions(), auto=True) if guarded else None
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                data = torch.load(path)
        finally:
            if session is not None:
                session.close()
        assert data.shape == (2, 3)
        seen.append([(w.category, w.filename, str(w.message)) for w in caught])
    assert seen[0] == seen[1] and seen[0] and seen[0][0][1] == __file__
