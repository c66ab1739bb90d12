"""Built-in recipe ``gpt``: a GPT-style character language model (decoder-only transformer).

Point ``text=`` at a UTF-8 text file (default: ``data/tinyshakespeare/input.txt``,
the 1.1 MB Tiny Shakespeare corpus).  The first ``1 - val_fraction`` of the
characters train, the rest validate; the vocabulary is the training split's
characters (others map to ``<unk>``).  Training samples are windows of
``context + 1`` characters starting every ``stride`` characters (inputs: the
first ``context``, targets: the last ``context``); validation windows do not
overlap, so ``val/loss`` is the mean cross-entropy per character.

The default size (``layers=8 heads=8 embed=512``, context 256, batch 128:
about 25M parameters, 33k tokens per optimizer step) keeps one H100 busy; the
same keys make it tiny for a CPU (``layers=1 heads=2 embed=32 context=32
limit_chars=20000``).  Attention is PyTorch's fused causal
``scaled_dot_product_attention``; the embedding and output weights are tied;
AdamW is the fused implementation where torch has one (``fused=false`` turns it
off).  The transformer blocks are class ``Block``, so
``activation_checkpointing=[Block]`` recomputes them in backward.

    overt train gpt text=path/to/input.txt precision=bf16 compile=true
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.data import Dataset

import overt
from overt.engine.callbacks import Callback
from overt.errors import ConfigError
from overt.recipes.common import text_split

defaults = {
    "epochs": 1,
    "batch_size": 128,
    "val_batch_size": 256,
    "clip_grad_norm": 1.0,
    "log_every": 25,
    "monitor": "val/loss",
    "monitor_mode": "min",
    "text": "data/tinyshakespeare/input.txt",
    "limit_chars": 0,
    "val_fraction": 0.1,
    "context": 256,
    "stride": 128,
    "layers": 8,
    "heads": 8,
    "embed": 512,
    "dropout": 0.1,
    "lr": 1e-3,
    "weight_decay": 0.1,
    "fused": True,
}

GET_IT = "https://github.com/karpathy/char-rnn (data/tinyshakespeare/input.txt), or use any text file of your own"
UNK = 0


class Windows(Dataset):
    """Windows of ``context + 1`` ids from one long id tensor: ``(inputs, targets)``, shifted by one."""

    def __init__(self, ids: torch.Tensor, context: int, stride: int):
        self.ids, self.context = ids, context
        self.starts = list(range(0, len(ids) - context, stride))  # each window fits: start + context + 1 <= len

    def __len__(self) -> int:
        return len(self.starts)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, torch.Tensor]:
        w = self.ids[self.starts[i]:self.starts[i] + self.context + 1]
        return w[:-1], w[1:]


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention and an MLP, each on a residual."""

    def __init__(self, embed: int, heads: int, dropout: float):
        super().__init__()
        self.heads, self.dropout = heads, dropout
        self.ln1, self.ln2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
        self.qkv = nn.Linear(embed, 3 * embed)
        self.proj = nn.Linear(embed, embed)
        self.mlp = nn.Sequential(nn.Linear(embed, 4 * embed), nn.GELU(), nn.Linear(4 * embed, embed))
        self.drop = nn.Dropout(dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True,
                                             dropout_p=self.dropout if self.training else 0.0)
        x = x + self.drop(self.proj(att.transpose(1, 2).reshape(b, t, c)))
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """Token and position embeddings, ``layers`` blocks, a final norm and a tied output layer:
    ``ids (batch, time) -> logits (batch, time, vocab)``."""

    def __init__(self, vocab_size: int, context: int, layers: int, heads: int, embed: int, dropout: float):
        super().__init__()
        if embed % heads:
            raise ConfigError(f"embed={embed} is not a multiple of heads={heads}",
                              fix="choose embed divisible by heads (e.g. heads=8 embed=512)")
        self.context = context
        self.tok = nn.Embedding(vocab_size, embed)
        self.pos = nn.Embedding(context, embed)
        self.drop = nn.Dropout(dropout)
        self.blocks = nn.ModuleList([Block(embed, heads, dropout) for _ in range(layers)])
        self.ln = nn.LayerNorm(embed)
        self.head = nn.Linear(embed, vocab_size, bias=False)
        self.head.weight = self.tok.weight  # tied
        self.apply(self._init)
        for name, p in self.named_parameters():  # scaled residual projections (GPT-2)
            if name.endswith("proj.weight") or name.endswith("mlp.2.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * layers))

    @staticmethod
    def _init(m: nn.Module) -> None:
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, mean=0.0, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        t = ids.shape[1]
        x = self.drop(self.tok(ids) + self.pos(torch.arange(t, device=ids.device)))
        for block in self.blocks:
            x = block(x)
        return self.head(self.ln(x))


def n_params(model: nn.Module) -> int:
    """Distinct trainable parameters (the tied weight once)."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters() if p.requires_grad}.values())


def sequence_loss(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over every position of every window."""
    return F.cross_entropy(output.flatten(0, 1).float(), target.flatten())


def char_accuracy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Fraction of positions whose most likely next character is the right one."""
    return (output.argmax(dim=-1) == target).float().mean()


class Perplexity(Callback):
    """Adds ``val/perplexity`` (exp of the per-character validation loss)."""

    def on_validation_end(self, trainer: Any, metrics: dict[str, float]) -> None:
        if "val/loss" in metrics:
            metrics["val/perplexity"] = math.exp(min(metrics["val/loss"], 50.0))


def load_text(cfg: Any) -> tuple[list[str], torch.Tensor, torch.Tensor]:
    """(vocabulary, training ids, validation ids) of ``cfg.text`` (first ``limit_chars`` characters)."""
    _, train_text, val_text = text_split(cfg.text, limit_chars=cfg.limit_chars, val_fraction=cfg.val_fraction,
                                         get_it=GET_IT)
    vocab = ["<unk>", *sorted(set(train_text))]
    index = {ch: i for i, ch in enumerate(vocab)}
    encode = lambda s: torch.tensor([index.get(ch, UNK) for ch in s], dtype=torch.int64)  # noqa: E731
    return vocab, encode(train_text), encode(val_text)


def build_model(cfg: Any, meta: dict[str, Any]) -> nn.Module:
    return GPT(len(meta["vocab"]), cfg.context, cfg.layers, cfg.heads, cfg.embed, cfg.dropout)


def make_optimizer(model: nn.Module, lr: float, weight_decay: float, fused: bool) -> torch.optim.Optimizer:
    """AdamW with weight decay on matrices only (not on biases, norms); fused where torch has it."""
    decay = [p for p in model.parameters() if p.requires_grad and p.dim() >= 2]
    rest = [p for p in model.parameters() if p.requires_grad and p.dim() < 2]
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": rest, "weight_decay": 0.0}]
    if fused:
        try:
            return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95), fused=True)
        except (RuntimeError, TypeError, ValueError):  # an older torch or a device without the fused kernel
            pass
    return torch.optim.AdamW(groups, lr=lr, betas=(0.9, 0.95))


def build(cfg: Any) -> overt.Recipe:
    vocab, train_ids, val_ids = load_text(cfg)
    train = Windows(train_ids, cfg.context, cfg.stride)
    val = Windows(val_ids, cfg.context, cfg.context)
    if not len(train) or not len(val):
        raise ConfigError(f"{cfg.text} is too short for context={cfg.context} and val_fraction={cfg.val_fraction}",
                          fix="use a longer text, a smaller context or a larger limit_chars")
    meta = {"vocab": vocab}
    model = build_model(cfg, meta)
    return overt.Recipe(
        model=model,
        optimizer=make_optimizer(model, cfg.lr, cfg.weight_decay, cfg.fused),
        loss_fn=sequence_loss,
        train_data=train, val_data=val,
        metrics={"accuracy": char_accuracy},
        callbacks=[Perplexity()],
        meta=meta,
    )
