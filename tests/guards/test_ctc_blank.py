"""decoder-blank-not-loss-blank at run time (overt/guards/ctcblank.py; issue 33, w200): a CTC model whose
decoder removes another class than the loss's blank is named at the decoder, whatever its form (a decoder
class with a default blank index, a function over a batch built on torch.unique_consecutive, a transcriber
that looks its blank up in a vocabulary while the loss kept PyTorch's default), each with a twin that
agrees.  A decoder that removes nothing, one that runs the model itself, and a run without a CTC loss stay
quiet."""

from __future__ import annotations

from tests.guards.helpers import run_script_probe, slug_set

#: a frame classifier trained with a CTC loss on synthetic utterances (noisy one-hot frames, each symbol
#: held 2-3 frames with blank frames between); ``BLANK`` and ``LOSS`` are set by each script's first lines
HEAD = '''
torch.manual_seed(0)
g = torch.Generator().manual_seed(1)
C = len(VOCAB)
REAL = [i for i in range(C) if i != BLANK]


def utterance(t=14):
    symbols = [REAL[int(i)] for i in torch.randint(0, len(REAL), (3,), generator=g)]
    frames = []
    for s in symbols:
        frames += [s] * 2 + [BLANK] * 2
    frames = (frames + [BLANK] * t)[:t]
    x = F.one_hot(torch.tensor(frames), C).float() + 0.3 * torch.randn(t, C, generator=g)
    return x, symbols


data = [utterance() for _ in range(240)]
model = nn.Sequential(nn.Linear(C, 32), nn.ReLU(), nn.Linear(32, C))
opt = torch.optim.Adam(model.parameters(), lr=3e-3)
for epoch in range(3):
    for i in range(0, 200, 20):
        xs = torch.stack([x for x, _ in data[i:i + 20]])  # (N, T, C)
        log_probs = model(xs).log_softmax(-1).transpose(0, 1)  # (T, N, C)
        targets = torch.tensor([s for _, syms in data[i:i + 20] for s in syms])
        loss = LOSS(log_probs, targets, torch.full((20,), 14), torch.full((20,), 3))
        opt.zero_grad()
        loss.backward()
        opt.step()
model.eval()
'''


def _head(vocab: str, blank: str, loss: str) -> str:
    return ("import torch\nfrom torch import nn\nimport torch.nn.functional as F\n\n"
            f"VOCAB = {vocab}\nBLANK = {blank}\nLOSS = {loss}\n" + HEAD)


CLASS_DECODER = '''
class GreedyDecoder:
    def __init__(self, labels, blank_index=0):
        self.labels = labels
        self.blank_index = blank_index

    def decode(self, probs):
        out = []
        for row in probs.argmax(-1).tolist():
            prev, text = None, []
            for k in row:
                if k != prev and k != self.blank_index:
                    text.append(self.labels[k])
                prev = k
            out.append("".join(text))
        return out


decoder = __DECODER__
with torch.no_grad():
    texts = decoder.decode(model(torch.stack([x for x, _ in data[200:]])).softmax(-1))
print(sum(t == "".join(VOCAB[s] for s in syms) for t, (_, syms) in zip(texts, data[200:])))
'''


def test_a_decoder_class_left_at_its_default_blank_is_named(tmp_path):
    # w200's mechanism, batched, on probabilities: the loss's blank is the last label
    head = _head('list("abcdef_")', 'VOCAB.index("_")', "nn.CTCLoss(blank=BLANK)")
    findings = run_script_probe(tmp_path, CLASS_DECODER.replace("__DECODER__", "GreedyDecoder(VOCAB)"), head)
    assert slug_set(findings) == ["decoder-blank-not-loss-blank"], findings
    f = findings[0]
    assert "GreedyDecoder.decode()" in f["message"] and "removes class 0, not class 6" in f["message"]
    assert "blank=6" in f["message"] and "train.py:" in f["message"]


def test_a_decoder_class_given_the_loss_blank_is_quiet(tmp_path):
    head = _head('list("abcdef_")', 'VOCAB.index("_")', "nn.CTCLoss(blank=BLANK)")
    body = CLASS_DECODER.replace("__DECODER__", 'GreedyDecoder(VOCAB, blank_index=VOCAB.index("_"))')
    assert run_script_probe(tmp_path, body, head) == []


FUNCTION_DECODER = '''
def ctc_greedy(log_probs, blank=__BLANK__):
    """(T, N, C) log-probabilities -> one list of ids per utterance."""
    out = []
    for path in log_probs.argmax(-1).t():
        ids = torch.unique_consecutive(path)
        out.append(ids[ids != blank].tolist())
    return out


with torch.no_grad():
    hyps = ctc_greedy(model(torch.stack([x for x, _ in data[200:]])).log_softmax(-1).transpose(0, 1))
print(sum(h == syms for h, (_, syms) in zip(hyps, data[200:])))
'''


def test_a_decoding_function_over_a_batch_with_another_blank_is_named(tmp_path):
    # the functional loss with its blank last; the decoder's default drops class 0
    head = _head("['<b>', 'a', 'b', 'c', 'd', '<blank>']", "5",
                 "lambda lp, t, il, tl: F.ctc_loss(lp, t, il, tl, blank=5)")
    findings = run_script_probe(tmp_path, FUNCTION_DECODER.replace("__BLANK__", "0"), head)
    assert slug_set(findings) == ["decoder-blank-not-loss-blank"], findings
    assert "ctc_greedy()" in findings[0]["message"] and "removes class 0, not class 5" in findings[0]["message"]
    assert run_script_probe(tmp_path, FUNCTION_DECODER.replace("__BLANK__", "5"), head) == []


TRANSCRIBER = '''
def transcribe(scores, vocab):
    blank = vocab.index("<blank>")
    ids = scores.argmax(-1).tolist()
    return "".join(vocab[k] for i, k in enumerate(ids) if k != blank and (i == 0 or k != ids[i - 1]))


with torch.no_grad():
    hits = sum(transcribe(model(x), VOCAB) == "".join(VOCAB[s] for s in syms) for x, syms in data[200:])
print(hits)
'''


def test_a_transcriber_that_looks_its_blank_up_while_the_loss_kept_the_default_is_named(tmp_path):
    # the loss left at PyTorch's default blank 0; the vocabulary lists its blank token last
    head = _head("['<blank>'] + list('abcde')", "0", "nn.CTCLoss()")
    vocab_last = TRANSCRIBER.replace("transcribe(model(x), VOCAB)", "transcribe(model(x), VOCAB[1:] + ['<blank>'])")
    findings = run_script_probe(tmp_path, vocab_last, head)
    assert slug_set(findings) == ["decoder-blank-not-loss-blank"], findings
    assert "transcribe()" in findings[0]["message"] and "removes class 5, not class 0" in findings[0]["message"]
    assert run_script_probe(tmp_path, TRANSCRIBER, head) == []


def test_decoders_that_remove_nothing_or_run_the_model_and_runs_without_ctc_are_quiet(tmp_path):
    head = _head('list("abcdef_")', 'VOCAB.index("_")', "nn.CTCLoss(blank=BLANK)")
    body = '''
    def decode_frames(scores):
        return [VOCAB[k] for k in scores.argmax(-1).tolist()]  # every frame, blank included: no blank removed


    def greedy_decode(x):
        ids = torch.unique_consecutive(model(x).argmax(-1))  # runs the model itself
        return ids[ids != 0].tolist()


    with torch.no_grad():
        for x, _ in data[200:210]:
            decode_frames(model(x))
            greedy_decode(x)
    '''
    assert run_script_probe(tmp_path, body, head) == []
    # a classifier (no CTC loss) with a function named like a decoder that removes class 0
    body = '''
    def decode(scores):
        return [k for k in scores.argmax(-1).tolist() if k != 0]


    model.eval()
    with torch.no_grad():
        decode(model(x[1500:1600]))
    '''
    assert run_script_probe(tmp_path, body) == []
