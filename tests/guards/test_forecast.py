"""causal-mask-missing for models trained to predict later steps of a series of values (issue 33;
tests/wild w177): the perturbation premise -- the output scored against step t + k does not move
with step t + k -- in forms other than the wild case's padded convolution: a convolution module
padded on both sides, a bidirectional RNN (batch-first and sequence-first), a float-series
transformer without a causal mask; overt.guard, overt.Trainer and overt run; each beside its clean
twin, and the correct programs that share the shapes (an autoencoder, a forecaster of the steps
after its window) silent.  The series are real: the digits' 8x8 scans read as 64-step series."""

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

T = 64


def _series(n: int = 320) -> torch.Tensor:
    """(n, 64): each digit scan, row after row, as one series."""
    return digits()[0][:n]


class _PaddedConv(nn.Module):
    """A convolution padded by F.pad in its forward: (left, right)."""

    def __init__(self, c_in: int, c_out: int, pad: tuple[int, int]):
        super().__init__()
        self.pad = pad
        self.conv = nn.Conv1d(c_in, c_out, 3)

    def forward(self, x):
        return self.conv(F.pad(x, self.pad))


def _conv_net(pad: tuple[int, int]) -> nn.Module:
    return nn.Sequential(_PaddedConv(1, 16, pad), nn.ReLU(), _PaddedConv(16, 1, pad))


def _fit_channels(model: nn.Module, steps: int = 8) -> tuple[list, str]:
    """(N, 1, T) series, teacher forcing: output[..., t] is scored against x[..., t + 1]."""
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    data = _series().unsqueeze(1)
    for i in range(steps):
        x = data[40 * i:40 * (i + 1)]
        loss = F.mse_loss(model(x)[..., :-1], x[..., 1:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


class _RNN(nn.Module):
    def __init__(self, bidirectional: bool, batch_first: bool = True, cell: type = nn.GRU):
        super().__init__()
        self.rnn = cell(1, 16, batch_first=batch_first, bidirectional=bidirectional)
        self.head = nn.Linear(32 if bidirectional else 16, 1)

    def forward(self, x):
        return self.head(self.rnn(x)[0])


class _SeriesTransformer(nn.Module):
    def __init__(self, causal: bool):
        super().__init__()
        self.inp = nn.Linear(1, 16)
        self.pos = nn.Parameter(torch.randn(T, 16) * 0.1)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, batch_first=True), 1, enable_nested_tensor=False)
        self.head = nn.Linear(16, 1)
        self.causal = causal

    def forward(self, x):
        t = x.shape[1]
        mask = nn.Transformer.generate_square_subsequent_mask(t) if self.causal else None
        return self.head(self.encoder(self.inp(x) + self.pos[:t], mask=mask, is_causal=self.causal))


def _fit_steps(model: nn.Module, steps: int = 8, batch_first: bool = True) -> tuple[list, str]:
    """(N, T, 1) series (or (T, N, 1)): inputs = steps 0..T-2, targets = steps 1..T-1."""
    torch.manual_seed(0)
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    g = guarded(model, opt, ignore=TIMING)
    data = _series().unsqueeze(-1)
    for i in range(steps):
        s = data[40 * i:40 * (i + 1)]
        if not batch_first:
            s = s.transpose(0, 1)
        inputs, targets = (s[:, :-1], s[:, 1:]) if batch_first else (s[:-1], s[1:])
        loss = F.l1_loss(model(inputs), targets)
        opt.zero_grad()
        loss.backward()
        opt.step()
    return g.report(), g.session.options.stream.getvalue()


def test_a_convolution_padded_on_both_sides_is_named_at_its_call():
    findings, text = _fit_channels(_conv_net((1, 1)))
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "Sequential.0.conv (Conv1d, called at tests/guards/test_forecast.py:" in text, text
    assert "against the next step of its own input" in text and "pad convolutions on the left only" in text


def test_a_same_padded_conv_module_is_named():
    """The module form: nn.Conv1d(padding=1), a centred window, in a Sequential."""
    model = nn.Sequential(nn.Conv1d(1, 16, 3, padding=1), nn.ReLU(), nn.Conv1d(16, 1, 3, padding=1))
    findings, text = _fit_channels(model)
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "Sequential.0 (Conv1d" in text, text


def test_a_bidirectional_rnn_forecaster_is_named_at_its_rnn():
    findings, text = _fit_steps(_RNN(bidirectional=True))
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "_RNN.rnn (GRU" in text and "bidirectional=False" in text, text


def test_a_sequence_first_bidirectional_lstm_is_named():
    findings, text = _fit_steps(_RNN(bidirectional=True, batch_first=False, cell=nn.LSTM), batch_first=False)
    assert slugs(findings) == ["causal-mask-missing"], text
    assert "_RNN.rnn (LSTM" in text, text


def test_a_series_transformer_without_a_mask_is_named_at_its_attention():
    findings, text = _fit_steps(_SeriesTransformer(causal=False))
    assert slugs(findings) == ["causal-mask-missing"], text
    # the attention inside nn.MultiheadAttention, at the user's line that calls the encoder without a mask
    assert "F.scaled_dot_product_attention at tests/guards/test_forecast.py:" in text, text


@pytest.mark.parametrize("fit", [
    lambda: _fit_channels(_conv_net((2, 0))),
    lambda: _fit_channels(nn.Sequential(nn.ConstantPad1d((2, 0), 0.0), nn.Conv1d(1, 16, 3), nn.ReLU(),
                                        nn.ConstantPad1d((2, 0), 0.0), nn.Conv1d(16, 1, 3))),
    lambda: _fit_steps(_RNN(bidirectional=False)),
    lambda: _fit_steps(_RNN(bidirectional=False, batch_first=False, cell=nn.LSTM), batch_first=False),
    lambda: _fit_steps(_SeriesTransformer(causal=True)),
], ids=["left-padded-conv", "constant-pad-module", "gru", "lstm-sequence-first", "transformer-causal"])
def test_causal_twins_are_silent(fit):
    findings, text = fit()
    assert "causal-mask-missing" not in slugs(findings), text


def test_an_autoencoder_and_a_horizon_forecaster_are_silent():
    """Correct programs with the same shapes: the target is the input itself (an autoencoder seeing
    every step through a bottleneck), or the steps after the window (an MLP over the whole window)."""
    torch.manual_seed(0)
    ae = nn.Sequential(nn.Conv1d(1, 8, 3, padding=1), nn.ReLU(), nn.Conv1d(8, 1, 3, padding=1))
    mlp = nn.Sequential(nn.Linear(48, 64), nn.ReLU(), nn.Linear(64, 16))
    opt = torch.optim.Adam(list(ae.parameters()) + list(mlp.parameters()), lr=3e-3)
    g = guarded(ae, opt, ignore=TIMING)
    data = _series()
    for i in range(8):
        s = data[40 * i:40 * (i + 1)]
        loss = F.mse_loss(ae(s[:, None]), s[:, None]) + F.mse_loss(mlp(s[:, :48]), s[:, 48:])
        opt.zero_grad()
        loss.backward()
        opt.step()
    findings = g.report()
    assert "causal-mask-missing" not in slugs(findings), g.session.options.stream.getvalue()


def _engine(bidirectional: bool, tmp_path) -> dict:
    from torch.utils.data import TensorDataset

    from overt import Trainer

    torch.manual_seed(0)
    s = _series(640).unsqueeze(-1)
    model = _RNN(bidirectional=bidirectional, cell=nn.LSTM)
    trainer = Trainer(model, torch.optim.Adam(model.parameters(), lr=3e-3), nn.MSELoss(),
                      TensorDataset(s[:, :-1], s[:, 1:]), run_dir=tmp_path / "run", epochs=1, batch_size=32,
                      progress="off", tensorboard=False, checkpoint=False, guards=True)
    return trainer.fit()


@pytest.mark.parametrize("bidirectional", [True, False], ids=["bidirectional", "twin"])
def test_the_engine_names_a_forecaster_that_sees_the_future(bidirectional, tmp_path, capsys):
    summary = _engine(bidirectional, tmp_path)
    err = capsys.readouterr().err
    if bidirectional:
        assert "causal-mask-missing" in str(summary) and "_RNN.rnn (LSTM" in err, err
    else:
        assert "causal-mask-missing" not in str(summary) + err, err


_SCRIPT = textwrap.dedent('''
    import torch
    from torch import nn
    import torch.nn.functional as F
    from sklearn.datasets import load_digits

    torch.manual_seed(0)
    series = torch.tensor(load_digits().data[:256], dtype=torch.float32) / 16.0  # (256, 64)


    class Forecaster(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(1, 16)
            self.head = nn.Linear(16, 1)

        def forward(self, x):  # x: (N, T, 1)
            h = self.proj(x)
            q = k = v = h.unsqueeze(1)
            return self.head(F.scaled_dot_product_attention(q, k, v, is_causal=__CAUSAL__).squeeze(1))


    model = Forecaster()
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    for epoch in range(2):
        for i in range(0, 256, 32):
            s = series[i:i + 32].unsqueeze(-1)
            loss = F.mse_loss(model(s[:, :-1]), s[:, 1:])
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("done")
''')


@pytest.mark.slow  # a subprocess each, ~13 s on the shared machine
@pytest.mark.parametrize("causal", [False, True], ids=["no-mask", "twin"])
def test_overt_run_names_functional_attention_without_is_causal(causal, tmp_path):
    script = tmp_path / "forecast.py"
    script.write_text(_SCRIPT.replace("__CAUSAL__", str(causal)))
    out = subprocess.run([sys.executable, "-m", "overt", "run", str(script)], capture_output=True, text=True,
                         timeout=240, cwd=tmp_path)
    if causal:
        assert out.returncode == 0 and "causal-mask-missing" not in out.stdout + out.stderr, out.stderr
    else:
        assert out.returncode == 1, out.stdout + out.stderr
        text = out.stdout + out.stderr
        assert "causal-mask-missing" in text and "F.scaled_dot_product_attention at forecast.py:" in text, text
