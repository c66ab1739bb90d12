"""Built-in recipe ``sentiment``: positive/negative review sentences, a bag-of-embeddings classifier.

Data: the "Sentiment Labelled Sentences" set (Kotzias et al., KDD 2015; UCI
Machine Learning Repository): 3,000 one-line reviews from IMDb, Amazon and Yelp,
each ``sentence<TAB>label`` with label 0 (negative) or 1 (positive).  overt
never downloads it: point ``data_dir=`` at the folder holding
``imdb_labelled.txt``, ``amazon_cells_labelled.txt`` and ``yelp_labelled.txt``
(``sources=`` picks which).

Sentences are lower-cased and split into words; the vocabulary is built from
the training split only (words seen at least ``min_count`` times; others map
to an unknown token), so validation words never leak into it.  Each sentence
becomes a variable-length sequence of token ids, padded per batch; the model
averages the embeddings of the real (non-padding) tokens and classifies the
mean.  ``overt predict RUN_DIR "a sentence" ...`` (or a file of lines) prints
the label and its probability.

    overt train sentiment data_dir=path/to/sentiment-sentences
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn.utils.rnn import pad_sequence

import overt
from overt.engine.metrics import accuracy
from overt.errors import DataError
from overt.preprocessing import Preprocessing
from overt.recipes.common import require_file, split_order

defaults = {
    "epochs": 12,
    "batch_size": 32,
    "monitor": "val/accuracy",
    "monitor_mode": "max",
    "data_dir": "data/sentiment-sentences",
    "sources": ["imdb", "amazon", "yelp"],
    "val_fraction": 0.2,
    "split_seed": 0,
    "limit": 0,
    "min_count": 1,
    "max_len": 64,
    "dim": 64,
    "dropout": 0.3,
    "lr": 5e-3,
    "weight_decay": 1e-4,
}

FILES = {"imdb": "imdb_labelled.txt", "amazon": "amazon_cells_labelled.txt", "yelp": "yelp_labelled.txt"}
GET_IT = "https://archive.ics.uci.edu/dataset/331/sentiment+labelled+sentences"
LABELS = ["negative", "positive"]
PAD, UNK = 0, 1
_WORD = re.compile(r"[a-z0-9']+")


def tokenize(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def read_sentences(data_dir: str | Path, sources: list[str]) -> tuple[list[str], list[int]]:
    """Sentences and 0/1 labels from the chosen source files."""
    texts: list[str] = []
    labels: list[int] = []
    for source in sources:
        if source not in FILES:
            raise DataError(f"unknown sentiment source {source!r}", fix=f"use some of: {', '.join(FILES)}")
        path = require_file(Path(data_dir) / FILES[source], what=f"sentiment file {FILES[source]}",
                            get_it=GET_IT, setting="data_dir")
        text_file = path.read_text(encoding="utf-8", errors="replace")
        for n, line in enumerate(text_file.split("\n"), 1):  # not splitlines(): U+0085 occurs inside sentences
            if not line.strip():
                continue
            text, sep, label = line.rpartition("\t")
            if not sep or label.strip() not in ("0", "1"):
                raise DataError(f"{path}:{n} is not `sentence<TAB>0|1`", where=f"{path}:{n}",
                                fix=f"use the original files from {GET_IT}")
            texts.append(text.strip())
            labels.append(int(label))
    return texts, labels


def build_vocab(texts: list[str], min_count: int) -> list[str]:
    """Words of ``texts`` seen at least ``min_count`` times, most frequent first, after ``<pad>`` and ``<unk>``."""
    counts = Counter(word for text in texts for word in tokenize(text))
    words = sorted((w for w, c in counts.items() if c >= min_count), key=lambda w: (-counts[w], w))
    return ["<pad>", "<unk>", *words]


def preprocessing(vocab: list[str], max_len: int) -> Preprocessing:
    """Sentences -> token ids: lower-cased words (:func:`tokenize`) looked up in the training vocabulary,
    unknown words -> ``<unk>``, at most ``max_len``, padded per batch: training, predict and export share it."""
    return Preprocessing(tokens={"vocab": vocab, "split": "words", "lower": True, "pattern": _WORD.pattern,
                                 "max_len": max_len, "pad": PAD, "unk": UNK},
                         task="classification", labels=LABELS)


def encode(text: str, index: dict[str, int], max_len: int) -> torch.Tensor:
    ids = [index.get(word, UNK) for word in tokenize(text)][:max_len]
    return torch.tensor(ids or [UNK], dtype=torch.int64)


def pad_batch(samples: list[tuple[torch.Tensor, Any]]) -> tuple[torch.Tensor, torch.Tensor]:
    """Collate (ids, label) pairs: ids padded with ``<pad>`` to the batch's longest sentence."""
    ids, labels = zip(*samples)
    return pad_sequence(list(ids), batch_first=True, padding_value=PAD), torch.as_tensor(labels)


class MeanEmbeddingClassifier(nn.Module):
    """Mean of the non-padding token embeddings -> dropout -> linear; returns logits."""

    def __init__(self, vocab_size: int, dim: int, dropout: float, n_classes: int = 2):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, dim, padding_idx=PAD)
        self.drop = nn.Dropout(dropout)
        self.head = nn.Linear(dim, n_classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        mask = (ids != PAD).unsqueeze(-1).to(self.embed.weight.dtype)
        summed = (self.embed(ids) * mask).sum(dim=1)
        mean = summed / mask.sum(dim=1).clamp(min=1.0)
        return self.head(self.drop(mean))


def build_model(cfg: Any, meta: dict[str, Any]) -> nn.Module:
    return MeanEmbeddingClassifier(len(meta["vocab"]), cfg.dim, cfg.dropout)


def build(cfg: Any) -> overt.Recipe:
    texts, labels = read_sentences(cfg.data_dir, list(cfg.sources))
    train_idx, val_idx = split_order(len(texts), cfg.val_fraction, cfg.split_seed)
    if cfg.limit:
        train_idx, val_idx = train_idx[:cfg.limit], val_idx[:cfg.limit]
    vocab = build_vocab([texts[i] for i in train_idx], cfg.min_count)
    prep = preprocessing(vocab, cfg.max_len)
    as_data = lambda idx: [(torch.tensor(prep.ids(texts[i]) or [UNK]), labels[i]) for i in idx.tolist()]  # noqa: E731
    meta = {"vocab": vocab, "max_len": cfg.max_len, "labels": LABELS}
    model = build_model(cfg, meta)
    return overt.Recipe(
        model=model,
        optimizer=torch.optim.AdamW(model.parameters(), lr=cfg.lr, weight_decay=cfg.weight_decay),
        loss_fn=nn.CrossEntropyLoss(),
        train_data=as_data(train_idx), val_data=as_data(val_idx),
        collate_fn=pad_batch,
        metrics={"accuracy": accuracy},
        meta=meta,
        preprocessing=prep,
        raw_val=[texts[i] for i in val_idx.tolist()],
    )

