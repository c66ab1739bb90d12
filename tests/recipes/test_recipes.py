"""Every built-in recipe trains a few steps on a small slice of real data, cleanly, and its run is usable."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import torch

import overt
from overt.errors import ConfigError, DataError
from tests.recipes.conftest import houses_csv, shared, train


def summary_of(run_dir):
    return json.loads((run_dir / "summary.json").read_text())


def test_every_builtin_recipe_has_defaults_a_docstring_and_build():
    from overt.recipes.base import BUILTIN, load_recipe_module

    assert {"tiny", "sentiment", "mnist", "house-prices", "char-rnn", "resnet", "finetune"} <= set(BUILTIN)
    for name in BUILTIN:
        module = load_recipe_module(name)
        assert module.__doc__ and len(module.__doc__) > 200, name
        assert isinstance(module.defaults, dict) and callable(module.build), name


def test_tiny_learns_its_plane_and_predicts_labels(runs):
    run = runs("tiny")
    assert summary_of(run)["final"]["val/accuracy"] >= 0.85
    predictor = overt.Predictor.from_run(run, quiet=True)
    out = predictor.predict([[3.0, -3.0, 0.0, 0.0], [-3.0, 3.0, 0.0, 0.0]])
    assert [o["class"] for o in out] == [1, 0]
    assert all(0.5 < o["probability"] <= 1.0 for o in out)


def test_house_prices_standardises_with_training_statistics_only(tmp_path):
    from overt.config import resolve
    from overt.recipes import house_prices
    from overt.recipes.common import split_order

    csv = houses_csv(tmp_path)
    cfg = resolve(house_prices.defaults, {**house_prices.defaults, "csv": str(csv)})
    recipe = house_prices.build(cfg)
    _, rows = house_prices.read_table(csv)
    train_idx, _ = split_order(len(rows), cfg.val_fraction, cfg.split_seed)
    sizes = torch.tensor([float(rows[i]["size_sqft"]) for i in train_idx.tolist()])
    assert recipe.meta["features"] == ["size_sqft", "bedrooms", "age_years", "distance_km"]
    assert recipe.meta["x_mean"][0] == pytest.approx(float(sizes.mean()), rel=1e-5)
    assert abs(float(recipe.train_data.tensors[0][:, 0].mean())) < 1e-5  # train split centred, val not forced


def test_house_prices_trains_and_predicts_prices_from_a_named_csv(runs, tmp_path):
    run = runs("house-prices")
    final = summary_of(run)["final"]
    assert final["val/r2"] > 0.5 and {"val/mse", "val/mae"} <= set(final)
    predictor = overt.Predictor.from_run(run, quiet=True)
    big = {"size_sqft": "3000", "bedrooms": "5", "age_years": "5", "distance_km": "1", "price": "ignored"}
    small = {"size_sqft": "700", "bedrooms": "1", "age_years": "70", "distance_km": "25"}
    out = predictor.predict([big, small])
    assert out[0]["price"] > out[1]["price"]


def test_house_prices_without_a_csv_says_how_to_get_one():
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as run

    module, cfg = resolve_run_config("house-prices", [])
    with pytest.raises(ConfigError, match="csv= is empty") as err:
        run(cfg, module)
    assert "python -m overt.recipes.house_prices" in str(err.value) and "csv=synthetic" in str(err.value)


def test_house_prices_csv_synthetic_builds_on_the_generated_rows_and_says_so(tmp_path, capsys):
    """The README's "or a synthetic one": csv=synthetic, the same rows the generator writes."""
    from overt.config import resolve
    from overt.recipes import house_prices

    cfg = resolve(house_prices.defaults, {**house_prices.defaults, "csv": "synthetic"})
    recipe = house_prices.build(cfg)
    assert "generated rows" in capsys.readouterr().err
    written = house_prices.build(resolve(house_prices.defaults, {**house_prices.defaults, "csv": str(
        house_prices.write_synthetic_csv(tmp_path / "houses.csv"))}))
    assert torch.equal(recipe.train_data.tensors[0], written.train_data.tensors[0])


def test_resnet_batch_norm_uses_running_statistics_in_eval(runs):
    run = runs("resnet")
    predictor = overt.Predictor.from_run(run, quiet=True)
    from sklearn.datasets import load_digits

    images = load_digits().images[:6]  # raw pixels 0..16
    together = predictor.run_batch(predictor.prepare(list(images)))
    alone = torch.cat([predictor.run_batch(predictor.prepare([img])) for img in images])
    assert torch.allclose(together, alone, atol=1e-5)  # a prediction does not depend on its batch


def test_finetune_replaces_the_head_freezes_then_unfreezes_the_backbone(runs, tmp_path, capfd):
    from safetensors.torch import load_file

    base = runs("resnet")
    summary = train("finetune", tmp_path / "ft", init_from=str(base), limit=96, epochs=2, freeze_epochs=1,
                    lr=0.01, backbone_lr_scale=0.1)
    err = capfd.readouterr().err
    assert "missing (kept as initialised): head.weight, head.bias" in err
    assert "epoch 2: backbone unfrozen" in err
    before, after = load_file(base / "model.safetensors"), load_file(tmp_path / "ft" / "model.safetensors")
    assert not torch.equal(before["backbone.0.conv.weight"], after["backbone.0.conv.weight"])  # trained in epoch 2
    assert summary["epochs"] == 2
    # the model summary (printed at the start) counts the backbone as frozen: it is, for the first epoch
    head = sum(v.numel() for k, v in after.items() if k.startswith("head."))
    assert summary["model"]["trainable"] == head and summary["model"]["frozen"] > 0


def test_finetune_backbone_does_not_move_while_frozen(runs, tmp_path):
    from safetensors.torch import load_file

    base = runs("resnet")
    train("finetune", tmp_path / "frozen", init_from=str(base), limit=64, epochs=1, freeze_epochs=1)
    before, after = load_file(base / "model.safetensors"), load_file(tmp_path / "frozen" / "model.safetensors")
    assert torch.equal(before["backbone.0.conv.weight"], after["backbone.0.conv.weight"])
    assert not torch.equal(before["head.weight"], after["head.weight"]) or before["head.weight"].shape != \
        after["head.weight"].shape


def test_finetune_refuses_a_run_of_another_recipe(runs):
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as run

    module, cfg = resolve_run_config("finetune", [f"init_from={runs('tiny')}"])
    with pytest.raises(ConfigError, match="finetune starts from a resnet or mnist run"):
        run(cfg, module)


def test_sentiment_vocabulary_comes_from_the_training_split(runs):
    run = runs("sentiment")
    meta = json.loads((run / "recipe_meta.json").read_text())
    assert meta["vocab"][:2] == ["<pad>", "<unk>"] and len(meta["vocab"]) > 100
    predictor = overt.Predictor.from_run(run, quiet=True)
    out = predictor.predict(["great", "a zzzunseenword"])
    assert {o["label"] for o in out} <= {"positive", "negative"}
    assert torch.equal(predictor.prepare(["a zzzunseenword"])[0, 1], torch.tensor(1))  # <unk>


def test_mnist_reads_idx_and_predicts_raw_pixels_like_training(runs):
    from overt.recipes.mnist import load_mnist_split, normalised

    run = runs("mnist")
    meta = json.loads((run / "recipe_meta.json").read_text())
    (x_tr, _), _ = load_mnist_split(shared("mnist-t10k"), 0.2, limit=256)
    assert meta["mean"] == pytest.approx(float(x_tr.astype(np.float32).mean() / 255), rel=1e-5)
    predictor = overt.Predictor.from_run(run, quiet=True)
    raw = [x_tr[i] for i in range(4)]
    assert torch.allclose(predictor.prepare(raw), normalised(x_tr[:4], meta["mean"], meta["std"]))
    assert len(predictor.predict(raw)) == 4


def test_mnist_missing_files_name_the_folder_and_where_to_get_them(tmp_path):
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as run

    module, cfg = resolve_run_config("mnist", [f"data_dir={tmp_path}"])
    with pytest.raises(DataError) as err:
        run(cfg, module)
    text = str(err.value)
    assert "t10k-images-idx3-ubyte" in text and str(tmp_path) in text and "lecun.com" in text


def test_char_rnn_pads_packs_reports_perplexity_and_samples(runs):
    run = runs("char-rnn")
    final = summary_of(run)["final"]
    assert final["val/perplexity"] == pytest.approx(math.exp(final["val/loss"]), rel=1e-6)
    assert (run / "sample.txt").read_text().startswith("ROMEO:")
    predictor = overt.Predictor.from_run(run, quiet=True)
    out = predictor.predict(["JULIET:"])
    assert out[0]["text"].startswith("JULIET:") and len(out[0]["text"]) == len("JULIET:") + 40


def test_char_rnn_packed_batch_equals_each_sequence_alone():
    from overt.recipes.char_rnn import CharRNN, pad_collate

    torch.manual_seed(0)
    model = CharRNN(12, 8, 16, 1, "lstm", 0.0).eval()
    seqs = [torch.randint(2, 12, (n,)) for n in (9, 4, 6)]
    inputs, lengths, targets = pad_collate(seqs)
    assert (targets[1, 3:] == -100).all() and lengths.tolist() == [8, 3, 5]
    batched = model(inputs, lengths)
    for row, seq in enumerate(seqs):
        alone = model(seq[:-1].unsqueeze(0))
        assert torch.allclose(batched[row, :len(seq) - 1], alone[0], atol=1e-5)


def test_char_rnn_missing_text_names_the_setting(tmp_path):
    from overt.cli.train import resolve_run_config
    from overt.compose import train_recipe as run

    module, cfg = resolve_run_config("char-rnn", [f"text={tmp_path / 'nope.txt'}"])
    with pytest.raises(DataError, match="text file not found") as err:
        run(cfg, module)
    assert "text=" in str(err.value)
