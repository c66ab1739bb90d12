"""train-serve-skew at evaluation time during training (overt/guards/skew.py): inputs
standardised for training but not for evaluation; the twin prepares both alike."""

from __future__ import annotations

import pytest
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, mlp, slugs


@pytest.mark.parametrize("same", [False, True])
def test_evaluation_inputs_prepared_unlike_training_are_named(same):
    torch.manual_seed(0)
    x, y = digits()
    mean, std = x[:1400].mean(0), x[:1400].std(0) + 1e-3
    train = DataLoader(TensorDataset((x[:1400] - mean) / std, y[:1400]), batch_size=64, shuffle=True)
    val_x = (x[1400:] - mean) / std if same else x[1400:]  # the bug: raw pixels in evaluation
    val = DataLoader(TensorDataset(val_x, y[1400:]), batch_size=128)
    model = mlp()
    findings, text = _fit_and_evaluate(model, torch.optim.Adam(model.parameters(), lr=1e-2), train, val)
    assert slugs(findings) == ([] if same else ["train-serve-skew"]), text
    if not same:
        assert "evaluation inputs of Sequential are not prepared like its training inputs" in text


def _fit_and_evaluate(model, opt, train, val, augment=lambda i, xb: xb) -> tuple[list, str]:
    """Two epochs, each followed by an evaluation pass, guarded: (findings, the guard's output)."""
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(2):
        model.train()
        for i, (xb, yb) in enumerate(train):
            opt.zero_grad()
            nn.functional.cross_entropy(model(augment(i, xb)), yb).backward()
            opt.step()
        model.eval()
        with torch.no_grad():
            for xb, yb in val:
                model(xb)
    return g.report(), g.session.options.stream.getvalue()


def _tones(n: int, sr: int, seconds: float, seed: int):
    """Ten classes of noisy tones (class k at 40 + 18k Hz), sampled at ``sr`` Hz."""
    g = torch.Generator().manual_seed(seed)
    y = torch.randint(10, (n,), generator=g)
    t = torch.arange(int(round(sr * seconds))) / sr
    wave = (0.5 + torch.rand(n, 1, generator=g)) * torch.sin(
        6.283 * (40.0 + 18.0 * y.float())[:, None] * t[None] + 6.283 * torch.rand(n, 1, generator=g))
    return wave + 0.3 * torch.randn(wave.shape, generator=g), y


def _spectrum(wave: torch.Tensor) -> torch.Tensor:
    return torch.log1p(torch.fft.rfft(wave, n=256).abs())


@pytest.mark.parametrize("resampled", [False, True])
def test_evaluation_inputs_outside_the_training_range_are_named_without_eval(resampled):
    """Recordings at 500 Hz read as the training rate (1000 Hz): every tone lands where training
    had none.  The evaluation is a plain ``with torch.no_grad(): model(x)`` (no model.eval(): the
    model has no Dropout/BatchNorm).  The twin resamples first (its noise floor is lower: a shift
    the model does not care about, which stays under the threshold)."""
    torch.manual_seed(0)
    wave, y = _tones(1500, 1000, 0.256, 1)
    model = nn.Sequential(nn.Linear(129, 64), nn.ReLU(), nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    loader = DataLoader(TensorDataset(_spectrum(wave), y), batch_size=64, shuffle=True)
    for epoch in range(3):
        for xb, yb in loader:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
    rec, rec_y = _tones(400, 500, 0.512, 2)
    clips = rec[:, :256]
    if resampled:
        clips = nn.functional.interpolate(rec[:, None], scale_factor=2, mode="linear")[:, 0, :256]
    with torch.no_grad():
        acc = (model(_spectrum(clips)).argmax(1) == rec_y).float().mean().item()
    findings = g.report()
    text = g.session.options.stream.getvalue()
    assert (acc > 0.8) == resampled, acc  # the bug is real
    assert slugs(findings) == ([] if resampled else ["train-serve-skew"]), text
    if not resampled:
        assert "lie outside the range of its training inputs" in text and "test_skew.py:" in text


def test_a_head_on_a_trained_encoder_is_not_compared_on_another_domain():
    # domain adaptation: the encoder trains on both domains (the target one unlabelled), the classifier
    # head only on the source's features; the target's features are where the head never trained, by
    # design, while the data are prepared alike (round seven's w185 twin had this finding)
    torch.manual_seed(0)
    x, y = digits()
    source, target = x[:900], x[900:] * 0.7 + 0.3
    encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU())
    head = nn.Linear(32, 10)
    opt = torch.optim.Adam([*encoder.parameters(), *head.parameters()], lr=1e-2)
    g = guarded([encoder, head], opt, ignore=TIMING)
    for epoch in range(3):
        for i in range(0, 896, 64):
            h_src, h_tgt = encoder(source[i:i + 64]), encoder(target[i % 800:i % 800 + 64])
            loss = nn.functional.cross_entropy(head(h_src), y[i:i + 64]) + h_tgt.pow(2).mean() * 1e-3
            opt.zero_grad()
            loss.backward()
            opt.step()
        with torch.no_grad():
            for i in range(0, 897, 128):
                head.eval()(encoder.eval()(target[i:i + 128]))
        encoder.train()
        head.train()
    assert "train-serve-skew" not in slugs(g.report())


@pytest.mark.parametrize("same", [False, True, "padded"])
def test_images_normalised_with_other_statistics_in_evaluation_are_named(same):
    """Colour images normalised per channel with the training statistics for training, and with
    (0.5, 0.5, 0.5) in evaluation (the bug); training augments (flips, shifts), the twin evaluates with
    the training statistics.  A small CNN: its input is a batch of images, compared through each image's
    per-channel mean and spread."""
    torch.manual_seed(0)
    x, y = digits()
    g = torch.Generator().manual_seed(0)
    images = x.view(-1, 1, 8, 8) * (0.3 + 0.7 * torch.rand(len(x), 3, 1, 1, generator=g))
    mean = images[:1400].mean((0, 2, 3), keepdim=True)
    std = images[:1400].std((0, 2, 3), keepdim=True)
    val_x = (images[1400:] - mean) / std if same else (images[1400:] - 0.5) / 0.5
    if same == "padded":  # evaluated at another size (a fully convolutional net): not compared
        val_x = nn.functional.pad(val_x, (2, 2, 2, 2))
    train = DataLoader(TensorDataset((images[:1400] - mean) / std, y[:1400]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(val_x, y[1400:]), batch_size=128)
    head = [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(16, 10)] if same == "padded" \
        else [nn.Flatten(), nn.Linear(16 * 64, 10)]
    model = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), *head)
    findings, text = _fit_and_evaluate(
        model, torch.optim.Adam(model.parameters(), lr=1e-3), train, val,
        augment=lambda i, xb: torch.roll(xb.flip(3) if i % 2 else xb, shifts=i % 3 - 1, dims=3))  # flips, shifts
    assert slugs(findings) == ([] if same else ["train-serve-skew"]), text
    if not same:
        assert "the evaluation inputs of Sequential" in text and "test_skew.py:" in text


@pytest.mark.parametrize("same", [False, True])
def test_no_grad_blocks_without_a_forward_do_not_use_up_the_armings(same):
    """An average of the weights updated under ``no_grad`` after each of 66 steps, then one evaluation
    under ``no_grad`` without ``eval()`` (the MLP has no Dropout/BatchNorm): the averaging blocks run no
    forward, so they give their arming back and the evaluation is still compared (before, 20 such blocks
    used up the armings and the raw-pixel evaluation went unseen)."""
    torch.manual_seed(0)
    x, y = digits()
    mean, std = x[:1400].mean(0), x[:1400].std(0) + 1e-3
    train = DataLoader(TensorDataset((x[:1400] - mean) / std, y[:1400]), batch_size=64, shuffle=True)
    val_x = (x[1400:] - mean) / std if same else x[1400:]  # the bug: raw pixels in evaluation
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    average = [p.detach().clone() for p in model.parameters()]
    g = guarded(model, opt, ignore=TIMING)
    for epoch in range(3):
        for xb, yb in train:
            opt.zero_grad()
            nn.functional.cross_entropy(model(xb), yb).backward()
            opt.step()
            with torch.no_grad():
                for a, p in zip(average, model.parameters()):
                    a.mul_(0.99).add_(p, alpha=0.01)
    with torch.no_grad():
        model(val_x)
    findings, text = g.report(), g.session.options.stream.getvalue()
    assert slugs(findings) == ([] if same else ["train-serve-skew"]), text


def _row_normalised(x: torch.Tensor, centred_scale: bool) -> torch.Tensor:
    """Each image centred on its own mean and scaled to unit norm; the bug takes the norm of the uncentred image."""
    centred = x - x.mean(1, keepdim=True)
    return centred / (centred if centred_scale else x).norm(dim=1, keepdim=True).clamp_min(1e-6)


@pytest.mark.parametrize("same", [False, True])
def test_evaluation_values_off_the_training_range_are_named(same):
    # the training scans carry a background level the per-image normalisation is there to remove, the test scans
    # none; the buggy scale comes from the uncentred pixels, so training images shrink and the clean test images do
    # not: part of the evaluation values lie where no training value does, while each feature's mean and spread
    # move less than the shift comparison's thresholds
    torch.manual_seed(0)
    x, y = digits()
    level = 0.6 * torch.rand(1400, 1, generator=torch.Generator().manual_seed(0))
    train = DataLoader(TensorDataset(_row_normalised(x[:1400] + level, same), y[:1400]), batch_size=64, shuffle=True)
    val = DataLoader(TensorDataset(_row_normalised(x[1400:], same), y[1400:]), batch_size=128)
    model = mlp()
    findings, text = _fit_and_evaluate(model, torch.optim.Adam(model.parameters(), lr=1e-2), train, val)
    assert slugs(findings) == ([] if same else ["train-serve-skew"]), text
    if not same:
        assert "leave the range of its training inputs" in text


def test_a_range_that_holds_every_phase_of_training_stays_silent_on_fine_tuning_data():
    # pretrained on clean digits, fine-tuned on noisier scans, evaluated on noisier scans (w189's twin): the
    # first training rows alone are the clean ones; the latest rows hold the noisy phase
    torch.manual_seed(0)
    x, y = digits()
    noisy = x[1000:] + 0.25 * torch.randn(len(x) - 1000, 64, generator=torch.Generator().manual_seed(0))
    model = mlp()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    g = guarded(model, opt, ignore=TIMING)
    for phase in (DataLoader(TensorDataset(x[:1000], y[:1000]), batch_size=64, shuffle=True),
                  DataLoader(TensorDataset(noisy[:300], y[1000:1300]), batch_size=64, shuffle=True)):
        for _ in range(4 if len(phase.dataset) == 1000 else 40):  # checked steps in both phases
            model.train()
            for xb, yb in phase:
                opt.zero_grad()
                nn.functional.cross_entropy(model(xb), yb).backward()
                opt.step()
    model.eval()
    with torch.no_grad():
        model(noisy[300:])
    findings = g.report()
    assert "train-serve-skew" not in slugs(findings), g.session.options.stream.getvalue()
