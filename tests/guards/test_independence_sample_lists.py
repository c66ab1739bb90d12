"""batch-dependent-eval on models that take their batch as a list of samples (overt/guards/independence.py):
sequences of their own lengths passed as a Python list, padded inside the model's forward.  A recurrent cell
run over the padded batch updates, at each step, only the rows still running, counted from the whole
batch's lengths: that is per sample only when the rows are in the order the counts assume (longest
first).  Bug: the rows are padded in the batch's own order; twin: in length order.  Recurrent cells behave
the same in both modes, so an evaluation under ``no_grad`` without ``model.eval()`` is probed too."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from tests.conftest import TIMING
from tests.guards.helpers import digits, guarded, slugs


def _sequences(x: torch.Tensor) -> list[torch.Tensor]:
    """Each digit as the sequence of its well-inked rows (2 to 8 rows of 8 pixels): lengths of their own."""
    rows = x.reshape(len(x), 8, 8)
    out = []
    for r in rows:
        inked = r[r.sum(1) > 2.0]
        out.append(inked if len(inked) >= 2 else r[:2])
    return out


class RowCells(nn.Module):
    def __init__(self, sort: bool):
        super().__init__()
        self.sort = sort
        self.cell = nn.GRUCell(8, 32)
        self.out = nn.Linear(32, 10)

    def forward(self, seqs: list[torch.Tensor]) -> torch.Tensor:
        lengths = torch.tensor([len(s) for s in seqs])
        order = torch.argsort(-lengths, stable=True) if self.sort else torch.arange(len(seqs))
        steps = int(lengths.max())
        data = torch.zeros(steps, len(seqs), 8)
        for row, k in enumerate(order.tolist()):
            data[:len(seqs[k]), row] = seqs[k]
        running = [int((lengths > t).sum()) for t in range(steps)]  # rows still running: longest first
        h = torch.zeros(len(seqs), 32)
        for t, n in enumerate(running):
            h = torch.cat([self.cell(data[t, :n], h[:n]), h[n:]])
        back = torch.empty_like(order)
        back[order] = torch.arange(len(order))
        return torch.log_softmax(self.out(h[back]), dim=1)


def _run(model: nn.Module, evaluate_in_eval_mode: bool):
    torch.manual_seed(0)
    x, y = digits()
    seqs = _sequences(x)
    opt = torch.optim.Adam(model.parameters(), lr=1e-2)
    g = guarded(model, opt, ignore=TIMING)
    for i in range(0, 1216, 64):
        opt.zero_grad()
        nn.functional.nll_loss(model(seqs[i:i + 64]), y[i:i + 64]).backward()
        opt.step()
    if evaluate_in_eval_mode:
        model.eval()
    with torch.no_grad():
        correct = sum(int((model(seqs[i:i + 64]).argmax(1) == y[i:i + 64]).sum()) for i in range(1216, 1792, 64))
    assert correct > 0
    return g.report(), g.session.options.stream.getvalue()


@pytest.mark.parametrize("eval_mode", [True, False], ids=["eval-mode", "no-grad-in-training-mode"])
def test_a_list_batch_whose_rows_the_running_counts_misread_is_named_and_its_twin_is_silent(eval_mode):
    findings, text = _run(RowCells(sort=False), eval_mode)
    assert "batch-dependent-eval" in slugs(findings), text
    assert "first 32 samples of a batch of 64" in text and "rows kept by counts computed from the whole batch" in text
    findings, text = _run(RowCells(sort=True), eval_mode)
    assert findings == [], text


def test_recurrent_cells_are_mode_free():
    from overt.guards.independence import mode_free

    assert mode_free(RowCells(True))
    assert mode_free(nn.Sequential(nn.LSTMCell(4, 4))) and mode_free(nn.Sequential(nn.RNNCell(4, 4)))
