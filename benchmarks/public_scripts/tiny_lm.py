"""A tiny causal language model and a text data set, made locally for the Hugging Face entries of
manifest.json (no hub is reachable here): a 512-token byte-level BPE trained on the text, a randomly
initialised 2-layer Llama (hidden size 64) saved with ``save_pretrained``, and ``train.jsonl`` /
``test.jsonl`` of ``{"text": paragraph}`` lines, which ``datasets.load_dataset(DIR)`` reads as the
train and test splits.

    python tiny_lm.py TEXT MODEL_DIR DATA_DIR
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def main(text_path: Path, model_dir: Path, data_dir: Path) -> None:
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    text = text_path.read_text(encoding="utf-8")
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([text[:200_000]], trainers.BpeTrainer(
        vocab_size=512, special_tokens=["<pad>", "<s>", "</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(model_dir)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(fast), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                         pad_token_id=fast.pad_token_id, bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id)
    LlamaForCausalLM(config).save_pretrained(model_dir)
    paragraphs = text.split("\n\n")
    data_dir.mkdir(parents=True, exist_ok=True)
    for name, part in (("train", paragraphs[:1500]), ("test", paragraphs[1500:1700])):
        with open(data_dir / f"{name}.jsonl", "w", encoding="utf-8") as f:
            for p in part:
                f.write(json.dumps({"text": p}) + "\n")


if __name__ == "__main__":
    main(*map(Path, sys.argv[1:4]))
