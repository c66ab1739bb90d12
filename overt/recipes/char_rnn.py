"""Built-in recipe ``char-rnn``: a character-level LSTM (or GRU) language model on a text file.

Point ``text=`` at a UTF-8 text file (default: ``data/tinyshakespeare/input.txt``,
the 1.1 MB Tiny Shakespeare corpus from Karpathy's char-rnn repository).  The
first ``1 - val_fraction`` of the characters train, the rest validate; the
vocabulary is the training split's characters (others map to ``<unk>``).

Training sequences have different lengths: the text is cut at blank lines
(one speech each in Tiny Shakespeare) and long passages into pieces of at most
``seq_len`` characters.  A padding collate pads each batch to its longest
sequence; the model packs the padded batch (``pack_padded_sequence``) so the
recurrent layer never reads padding, and the loss ignores padded positions.
Validation reads the held-out text in consecutive ``seq_len`` chunks, so
``val/loss`` is the mean cross-entropy per character and ``val/perplexity``
its exponential.  Gradient clipping is on by default (``clip_grad_norm=1.0``).

After training, a sample of ``sample_chars`` characters continuing ``prompt``
is printed and written to ``sample.txt`` in the run directory;
``overt predict RUN_DIR "ROMEO:"`` continues prompts the same way.

    overt train char-rnn text=path/to/input.txt
"""

from __future__ import annotations

import math
import re
import sys
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence, pad_sequence

import overt
from overt.engine.callbacks import Callback
from overt.errors import ConfigError
from overt.preprocessing import Preprocessing
from overt.recipes.common import text_split

defaults = {
    "epochs": 2,
    "batch_size": 32,
    "clip_grad_norm": 1.0,
    "monitor": "val/loss",
    "monitor_mode": "min",
    "text": "data/tinyshakespeare/input.txt",
    "limit_chars": 0,
    "val_fraction": 0.1,
    "seq_len": 64,
    "cell": "lstm",
    "embed": 64,
    "hidden": 128,
    "layers": 1,
    "dropout": 0.0,
    "lr": 3e-3,
    "prompt": "ROMEO:",
    "sample_chars": 300,
    "temperature": 0.8,
}

GET_IT = "https://github.com/karpathy/char-rnn (data/tinyshakespeare/input.txt), or use any text file of your own"
PAD, UNK = 0, 1
IGNORE = -100


def sequences(ids: torch.Tensor, text: str, seq_len: int) -> list[torch.Tensor]:
    """Passages of ``text`` (cut after blank lines), each cut into pieces of at most ``seq_len + 1`` ids."""
    out = []
    start = 0
    for match in [*re.finditer(r"\n\n+", text), None]:
        end = match.end() if match is not None else len(text)
        for piece_start in range(start, end, seq_len):
            piece = ids[piece_start:min(piece_start + seq_len + 1, end)]
            if len(piece) >= 2:
                out.append(piece)
        start = end
    return out


def chunks(ids: torch.Tensor, seq_len: int) -> list[torch.Tensor]:
    """Consecutive, overlapping-by-one chunks of ``seq_len + 1`` ids (every character predicted once)."""
    return [ids[i:i + seq_len + 1] for i in range(0, len(ids) - seq_len, seq_len)]


def pad_collate(samples: list[torch.Tensor]) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(inputs padded with ``<pad>``, lengths, targets padded with the ignored index -100)."""
    inputs = pad_sequence([s[:-1] for s in samples], batch_first=True, padding_value=PAD)
    targets = pad_sequence([s[1:] for s in samples], batch_first=True, padding_value=IGNORE)
    lengths = torch.tensor([len(s) - 1 for s in samples], dtype=torch.int64)
    return inputs, lengths, targets


class CharRNN(nn.Module):
    """Embedding -> LSTM/GRU -> linear; returns next-character logits (batch, time, vocab)."""

    def __init__(self, vocab_size: int, embed: int, hidden: int, layers: int, cell: str, dropout: float):
        super().__init__()
        if cell not in ("lstm", "gru"):
            raise ConfigError(f"cell={cell!r} is not a recurrent cell this recipe knows",
                              fix="use cell=lstm or cell=gru")
        self.embed = nn.Embedding(vocab_size, embed, padding_idx=PAD)
        rnn = nn.LSTM if cell == "lstm" else nn.GRU
        self.rnn = rnn(embed, hidden, num_layers=layers, batch_first=True, dropout=dropout if layers > 1 else 0.0)
        self.head = nn.Linear(hidden, vocab_size)

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor | None = None) -> torch.Tensor:
        x = self.embed(ids)
        if lengths is None:  # equal-length rows (validation chunks, export, sampling)
            out, _ = self.rnn(x)
        else:
            packed = pack_padded_sequence(x, lengths.cpu(), batch_first=True, enforce_sorted=False)
            out, _ = pad_packed_sequence(self.rnn(packed)[0], batch_first=True, total_length=ids.shape[1])
        return self.head(out)

    def step(self, ids: torch.Tensor, state: Any = None) -> tuple[torch.Tensor, Any]:
        """Logits for the last position and the recurrent state (for sampling one character at a time)."""
        out, state = self.rnn(self.embed(ids), state)
        return self.head(out[:, -1]), state


def sequence_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over the real (non-padding) characters."""
    return F.cross_entropy(output.flatten(0, 1), target.flatten(), ignore_index=IGNORE)


def sample(model: CharRNN, vocab: list[str], prompt: str, n_chars: int, temperature: float,
           seed: int = 0) -> str:
    """``prompt`` continued by ``n_chars`` characters drawn from the model (seeded, eval mode)."""
    index = {ch: i for i, ch in enumerate(vocab)}
    device = next(model.parameters()).device
    gen = torch.Generator(device="cpu").manual_seed(seed)
    was_training = model.training
    model.eval()
    out = []
    try:
        with torch.inference_mode():
            ids = torch.tensor([[index.get(ch, UNK) for ch in (prompt or "\n")]], device=device)
            logits, state = model.step(ids)
            for _ in range(n_chars):
                probs = torch.softmax(logits[0].float().cpu() / max(temperature, 1e-6), dim=-1)
                probs[PAD] = probs[UNK] = 0.0
                nxt = int(torch.multinomial(probs, 1, generator=gen))
                out.append(vocab[nxt])
                logits, state = model.step(torch.tensor([[nxt]], device=device), state)
    finally:
        model.train(was_training)
    return prompt + "".join(out)


class PerplexityAndSample(Callback):
    """Adds ``val/perplexity`` (exp of the per-character validation loss); after training, prints a
    sample and writes it to ``sample.txt`` in the run directory."""

    def __init__(self, vocab: list[str], prompt: str, n_chars: int, temperature: float, seed: int):
        self.vocab, self.prompt, self.n_chars, self.temperature, self.seed = vocab, prompt, n_chars, temperature, seed

    def on_validation_end(self, trainer: Any, metrics: dict[str, float]) -> None:
        if "val/loss" in metrics:
            metrics["val/perplexity"] = math.exp(min(metrics["val/loss"], 50.0))

    def on_summary(self, trainer: Any, summary: dict[str, Any]) -> None:
        if not self.n_chars:
            return
        text = sample(trainer.model, self.vocab, self.prompt, self.n_chars, self.temperature, self.seed)
        summary["sample"] = text
        print(f"char-rnn sample ({self.n_chars} characters, temperature {self.temperature}):\n{text}\n",
              file=sys.stderr)
        run_dir = getattr(trainer, "run_dir", None)  # the engine's own Trainer writes no run directory
        if run_dir is not None:
            from overt.run.atomic import write_text_atomic

            write_text_atomic(Path(run_dir) / "sample.txt", text + "\n")


def build_model(cfg: Any, meta: dict[str, Any]) -> nn.Module:
    return CharRNN(len(meta["vocab"]), cfg.embed, cfg.hidden, cfg.layers, cfg.cell, cfg.dropout)


def build(cfg: Any) -> overt.Recipe:
    path, train_text, val_text = text_split(cfg.text, limit_chars=cfg.limit_chars, val_fraction=cfg.val_fraction,
                                            get_it=GET_IT)
    vocab = ["<pad>", "<unk>", *sorted(set(train_text))]
    prep = Preprocessing(tokens={"vocab": vocab, "split": "chars", "pad": PAD, "unk": UNK})
    encode = lambda s: torch.tensor(prep.ids(s), dtype=torch.int64)  # noqa: E731
    train = sequences(encode(train_text), train_text, cfg.seq_len)
    val = chunks(encode(val_text), cfg.seq_len)
    if not train or not val:
        raise ConfigError(f"{path} is too short for seq_len={cfg.seq_len} and val_fraction={cfg.val_fraction}",
                          fix="use a longer text, a smaller seq_len or a larger limit_chars")
    meta = {"vocab": vocab, "prompt": cfg.prompt, "sample_chars": cfg.sample_chars, "temperature": cfg.temperature}
    model = build_model(cfg, meta)
    return overt.Recipe(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=cfg.lr),
        loss_fn=sequence_loss,
        train_data=train, val_data=val, collate_fn=pad_collate,
        forward=lambda m, batch: (m(batch[0], batch[1]), batch[2]),
        callbacks=[PerplexityAndSample(vocab, cfg.prompt, cfg.sample_chars, cfg.temperature, cfg.seed)],
        meta=meta,
        preprocessing=prep,  # text -> ids (predict samples continuations; export reads the ids)
        raw_val=[val_text[i:i + cfg.seq_len] for i in range(0, len(val_text) - cfg.seq_len, cfg.seq_len)],
    )


def model_inputs(batch: tuple[torch.Tensor, torch.Tensor, torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """The padded ids alone: the exported model reads equal-length rows (validation chunks)."""
    return (batch[0],)


def predict(model: CharRNN, inputs: list[Any], meta: dict[str, Any]) -> list[dict[str, str]]:
    """Each input line is a prompt; the answer is the prompt continued by ``sample_chars`` characters."""
    return [{"prompt": str(p), "text": sample(model, meta["vocab"], str(p), int(meta["sample_chars"]),
                                              float(meta["temperature"]), seed=i)}
            for i, p in enumerate(inputs)]
