"""Findings inside a LightningModule, a Lightning Callback, an Accelerate or Fabric loop say the fix in that
framework's terms (issue 22), and the premises of the framework rules hold in the real frameworks."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from overt.lint.engine import lint_source

FIXTURES = Path(__file__).parent / "fixtures"


def _fixes(source: str, slug: str) -> list[str]:
    hits = [h for h in lint_source(textwrap.dedent(source)) if h.slug == slug]
    assert hits, f"no {slug} finding"
    return [h.fix for h in hits]


def test_manual_optimisation_without_reset_speaks_lightning():
    fix, = _fixes("""
        import lightning as L
        class M(L.LightningModule):
            def __init__(self):
                super().__init__()
                self.automatic_optimization = False
            def training_step(self, batch, batch_idx):
                opt = self.optimizers()
                loss = self.net(batch).sum()
                self.manual_backward(loss)
                opt.step()
        """, "stale-gradients")
    assert "self.manual_backward(loss)" in fix and "Lightning does not reset gradients" in fix


CLIP_LIGHTNING = """
    import lightning as L
    import torch
    class M(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.automatic_optimization = False
            self.scaler = torch.cuda.amp.GradScaler()
        def training_step(self, batch, batch_idx):
            opt = self.optimizers()
            opt.zero_grad()
            self.scaler.scale(self.net(batch).sum()).backward()
            torch.nn.utils.clip_grad_norm_(self.parameters(), 1.0)
            self.scaler.step(opt)
    """

CLIP_ACCELERATE = """
    import torch
    from accelerate import Accelerator
    accelerator = Accelerator()
    scaler = torch.cuda.amp.GradScaler()
    for x in loader:
        optimizer.zero_grad()
        scaler.scale(model(x).sum()).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
    """


@pytest.mark.parametrize("source,words", [(CLIP_LIGHTNING, "self.clip_gradients"),
                                          (CLIP_ACCELERATE, "accelerator.clip_grad_norm_")])
def test_clip_before_unscale_names_the_frameworks_clipping(source, words):
    fix, = _fixes(source, "clip-before-unscale")
    assert words in fix


def test_accumulation_in_an_accelerate_loop_points_at_accelerate():
    fix, = _fixes("""
        import torch
        from accelerate import Accelerator
        accelerator = Accelerator()
        model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
        for i, (x, y) in enumerate(loader):
            loss = torch.nn.functional.mse_loss(model(x), y)
            accelerator.backward(loss)
            if (i + 1) % 4 == 0:
                optimizer.step()
                optimizer.zero_grad()
        """, "accumulation-unscaled")
    assert "accelerator.accumulate(model)" in fix and "gradient_accumulation_steps" in fix


def test_unshuffled_train_dataloader_speaks_lightning():
    fix, = _fixes("""
        import lightning as L
        from torch.utils.data import DataLoader
        class Data(L.LightningDataModule):
            pass
        class M(L.LightningModule):
            def train_dataloader(self):
                return DataLoader(self.train_set, batch_size=32)
        """, "unshuffled-training")
    assert "train_dataloader returns" in fix and "Lightning adds no shuffling" in fix


def test_every_rank_saves_in_an_accelerate_script_points_at_accelerate():
    fix, = _fixes("""
        import torch
        import torch.distributed as dist
        from accelerate import Accelerator
        accelerator = Accelerator()
        dist.init_process_group("nccl")
        torch.save(model.state_dict(), "model.pt")
        """, "every-rank-saves")
    assert "accelerator.is_main_process" in fix


def test_plain_loops_keep_the_plain_fix():
    fix, = _fixes("""
        import torch
        for x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            loss.backward()
            optimizer.step()
        """, "stale-gradients")
    assert fix.startswith("call optimizer.zero_grad() once per step") and "accelerat" not in fix


# --------------------------------------------------------------------------- the premises, in the real frameworks


def _fit(module, steps: int = 4):
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    x = torch.randn(32, 4)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    before = module.layer.weight.detach().clone()
    trainer = L.Trainer(max_steps=steps, logger=False, enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, accelerator="cpu", devices=1)
    trainer.fit(module, data)
    return not torch.equal(before, module.layer.weight.detach())


def test_a_training_step_without_return_never_trains_and_its_fix_does(recwarn):
    """What training-step-no-loss claims: Lightning runs every step, warns, and the weights never move."""
    import runpy
    ns = runpy.run_path(str(FIXTURES / "training-step-no-loss" / "bad.py"))
    ok = runpy.run_path(str(FIXTURES / "training-step-no-loss" / "ok.py"))
    assert _fit(ns["Regressor"]()) is False
    assert _fit(ok["Regressor"]()) is True


def test_lightning_keeps_a_module_left_in_eval_mode_by_a_training_hook():
    """What eval-mode-in-train claims for Lightning hooks: after validation the module is still in eval mode."""
    torch = pytest.importorskip("torch")
    L = pytest.importorskip("lightning")
    seen = []

    class Net(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(4, 1)

        def training_step(self, batch, batch_idx):
            seen.append(self.training)
            return torch.nn.functional.mse_loss(self.layer(batch[0]), batch[1])

        def validation_step(self, batch, batch_idx):
            pass

        def on_train_epoch_end(self):
            self.eval()

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    x = torch.randn(16, 4)
    data = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, x.sum(1, keepdim=True)), batch_size=8)
    L.Trainer(max_epochs=2, logger=False, enable_checkpointing=False, enable_progress_bar=False,
              enable_model_summary=False, accelerator="cpu", devices=1).fit(Net(), data, data)
    assert seen[:2] == [True, True] and seen[2:] == [False, False]  # the second epoch trains in eval mode


TEST_DOUBLES = """
import torch
import torch.distributed as dist
from torch import nn
from torch.utils.data import DataLoader, TensorDataset


class ModelWithConfig(nn.Module):
    def __init__(self):
        self.config = {"a": 1}


class Probe(nn.Module):
    def __init__(self):
        super().__init__()
        self.input_array = torch.rand(10, 5)

    def forward(self, x):
        return x @ self.input_array.t()


def test_save(tmp_path):
    dist.init_process_group("gloo")
    train_dl = DataLoader(TensorDataset(torch.tensor([1, 2, 3])))
    torch.save({"w": 1}, tmp_path / "w.pt")
"""


def test_test_doubles_in_test_files_are_left_alone(tmp_path):
    """missing-super-init, unregistered-tensor, unshuffled-training and every-rank-saves in a pytest module are
    test doubles and scratch files; the same code outside a test file is reported."""
    from overt.lint.engine import lint_file
    slugs = {"missing-super-init", "unregistered-tensor", "unshuffled-training", "every-rank-saves"}
    (tmp_path / "test_doubles.py").write_text(TEST_DOUBLES)
    (tmp_path / "doubles.py").write_text(TEST_DOUBLES)
    assert not {f.slug for f in lint_file(tmp_path / "test_doubles.py").findings} & slugs
    assert {f.slug for f in lint_file(tmp_path / "doubles.py").findings} >= slugs


def test_plain_backward_in_an_accelerate_accumulation_window_is_n_times_too_large():
    """What backward-bypasses-framework claims for Accelerate: accelerator.backward divides the loss by
    gradient_accumulation_steps, loss.backward() does not (the gradient is 4x larger with 4 steps)."""
    torch = pytest.importorskip("torch")
    accelerate = pytest.importorskip("accelerate")

    def grad(plain: bool):
        torch.manual_seed(0)
        accelerator = accelerate.Accelerator(cpu=True, gradient_accumulation_steps=4)
        model, optimizer = accelerator.prepare(torch.nn.Linear(3, 1), torch.optim.SGD([torch.zeros(1)], lr=0.1))
        with accelerator.accumulate(model):
            loss = model(torch.randn(8, 3)).pow(2).mean()
            loss.backward() if plain else accelerator.backward(loss)
        return model.weight.grad.clone()

    from accelerate.state import AcceleratorState, GradientState
    try:
        assert torch.allclose(grad(plain=True), 4 * grad(plain=False))
    finally:  # Accelerate keeps its state in process-wide singletons: leave none behind for other tests
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()
