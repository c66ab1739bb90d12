"""metric-off-definition on batched decoding that keeps tokens past each row's end (overt/guards/batchdecode.py;
issue 33, session 53, w383): the decoding function's first evaluation call is repeated on rows of its batch alone;
a row that alone ends at one end token, padded to the batch's width, must not go on with other tokens in the
batch.  A digits run whose decoder writes each image's label as a token sequence of 1-3 tokens then EOS: the loop
that stops when every row has ended and returns the raw tokens is named, the fix (tokens after each row's first
EOS replaced by padding) is quiet, so is a decoder that returns raw rows of its own width (the caller may cut
them) and one that always runs to the full length."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe as _run
from tests.guards.helpers import slug_set as _slugs

HEAD = '''
import torch
from sklearn.datasets import load_digits
from torch import nn
import torch.nn.functional as F

torch.manual_seed(0)
torch.set_num_threads(1)
d = load_digits()
x = torch.tensor(d.data, dtype=torch.float32) / 16
y = torch.tensor(d.target)
PAD, EOS, BOS, V, MAXLEN = 0, 1, 2, 13, 5


def targets(labels, fill=PAD):
    tgt = torch.full((len(labels), MAXLEN), fill)
    for i, k in enumerate(labels.tolist()):
        n = k % 3 + 1
        tgt[i, :n] = k + 3
        tgt[i, n] = EOS
    return tgt


class Writer(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.Linear(64, 48)
        self.emb = nn.Embedding(V, 16)
        self.dec = nn.GRU(16, 48, batch_first=True)
        self.out = nn.Linear(48, V)

    def forward(self, img, tgt):
        dec_in = torch.cat([torch.full((len(tgt), 1), BOS), tgt[:, :-1]], 1)
        y_, _ = self.dec(self.emb(dec_in), torch.tanh(self.enc(img))[None])
        return self.out(y_)


model = Writer()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
for step in range(150):
    i = (step * 64) % 1300
    tgt = targets(y[i:i + 64], fill=-100)  # nothing learned after EOS
    loss = F.cross_entropy(model(x[i:i + 64], tgt.clamp(min=0)).reshape(-1, V), tgt.reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
'''

DECODE = '''
def greedy_decode(model, img):
    h = torch.tanh(model.enc(img))[None]
    tok = torch.full((len(img), 1), BOS)
    out = []
    for _ in range(MAXLEN):
        y_, h = model.dec(model.emb(tok), h)
        tok = model.out(y_).argmax(-1)
        out.append(tok)
        {stop}
    out = torch.cat(out, 1)
    {mask}
    return {ret}


model.eval()
with torch.no_grad():
    gen = greedy_decode(model, x[1400:])
print("exact match", (gen[:, :MAXLEN] == targets(y[1400:])[:, :gen.shape[1]]).all(1).float().mean().item())
'''

STOP = "if (tok == EOS).all():\n            break"
MASK = ("ended = (out == EOS).long().cumsum(1)\n"
        "    out = out.masked_fill((ended - (out == EOS).long()) > 0, PAD)")
PADDED = "F.pad(out, (0, MAXLEN - out.shape[1]), value=PAD)"


def test_rows_kept_past_their_end_are_named_and_the_masked_twin_is_quiet(tmp_path):
    findings = _run(tmp_path, DECODE.format(stop=STOP, mask="", ret=PADDED), head=HEAD)
    assert _slugs(findings) == ["metric-off-definition"], findings
    message = findings[0]["message"]
    assert "greedy_decode()" in message and "end at the token 1 (EOS)" in message, message
    assert _run(tmp_path, DECODE.format(stop=STOP, mask=MASK, ret=PADDED), head=HEAD) == []


def test_raw_rows_of_their_own_width_and_full_length_decoding_are_quiet(tmp_path):
    assert _run(tmp_path, DECODE.format(stop=STOP, mask="", ret="out"), head=HEAD) == []
    assert _run(tmp_path, DECODE.format(stop="pass", mask="", ret=PADDED), head=HEAD) == []
