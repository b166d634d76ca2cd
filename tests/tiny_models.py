"""Tiny randomly initialised causal language models for exact, fast backend tests: a
Llama, and a Gemma 3 with an 8-token sliding window, three layers each, seeded, saved
beside the tokenizer a test module built (its vocabulary size is ``vocab``)."""
from __future__ import annotations

import importlib


def build_tiny_model(kind: str, path, vocab: int) -> None:
    """Save a seeded ``kind`` ("gemma3" or "llama") model of vocabulary ``vocab`` into
    ``path``. torch and transformers are imported here, when a test builds a model."""
    torch = importlib.import_module("torch")
    transformers = importlib.import_module("transformers")
    torch.manual_seed(0)
    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                  num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  max_position_embeddings=256, pad_token_id=0, bos_token_id=2, eos_token_id=1)
    if kind == "gemma3":
        cfg = transformers.Gemma3TextConfig(**common, sliding_window=8, query_pre_attn_scalar=8,
                                            layer_types=["sliding_attention", "full_attention",
                                                         "sliding_attention"])
        model = transformers.Gemma3ForCausalLM(cfg)
    else:
        model = transformers.LlamaForCausalLM(transformers.LlamaConfig(**common))
    model.save_pretrained(path)


def build_tiny_tokenizer(path, words) -> int:
    """Save a byte-level BPE tokenizer trained on ``words`` (BOS added, as Gemma's and
    Llama's) into ``path``; its vocabulary size."""
    from tokenizers import (  # noqa: PLC0415  the [local] extra, imported when used
        Tokenizer,
        decoders,
        models,
        pre_tokenizers,
        processors,
        trainers,
    )
    from transformers import PreTrainedTokenizerFast  # noqa: PLC0415  likewise
    special = ["<pad>", "<eos>", "<bos>", "<unk>"]
    t = Tokenizer(models.BPE(unk_token="<unk>"))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    t.train_from_iterator([" ".join(words) + " . ?"] * 20, trainer)
    t.post_processor = processors.TemplateProcessing(
        single="<bos> $A", special_tokens=[("<bos>", t.token_to_id("<bos>"))])
    fast = PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<bos>", eos_token="<eos>",
                                   unk_token="<unk>", pad_token="<pad>")
    fast.save_pretrained(path)
    return t.get_vocab_size()
