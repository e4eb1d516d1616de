"""Tiny random-weight transformers models with word-level tokenizers, built and saved locally (no network).

Each builder writes a folder that `from_pretrained(folder, local_files_only=True)` loads: config, weights
and a fast tokenizer whose vocabulary is the given words plus the special tokens.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

BASE_WORDS = (
    "the a an and of to in on was is it he she they his her had with for at as by not no yes Yes No 0 1 "
    "cat sat mat dog ran park ship captain crew planet story man woman found left came back home old new "
    "question : Is this claim consistent with document ? claim premise hypothesis . , ' \" !"
).split()


def words_of(texts: Iterable[str]) -> list[str]:
    """The word-level tokens of texts as the tiny tokenizers split them (words and single punctuation)."""
    out: list[str] = []
    for text in texts:
        out.extend(re.findall(r"\w+|[^\w\s]", text))
    return out


def _tokenizer(words: Iterable[str], specials: list[str], *, template: str, pair: str | None, **names: str):
    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    vocab: dict[str, int] = {}
    for token in [*specials, *BASE_WORDS, *words]:
        vocab.setdefault(token, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token=names["unk_token"]))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    special_ids = [(s, vocab[s]) for s in specials]
    tok.post_processor = processors.TemplateProcessing(
        single=template, pair=pair or f"{template} $B:1", special_tokens=special_ids
    )
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, **names)
    fast.model_max_length = 10**9  # the model's positions, not the tokenizer, set the window
    return fast, len(vocab)


def build_classifier(folder: Path, words: Iterable[str], *, labels: tuple[str, ...], seed: int = 0) -> Path:
    """A BERT sequence-pair classifier with the given labels ([CLS] premise [SEP] hypothesis [SEP])."""
    import torch
    from transformers import BertConfig, BertForSequenceClassification

    tokenizer, size = _tokenizer(
        words,
        ["[PAD]", "[UNK]", "[CLS]", "[SEP]"],
        template="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        unk_token="[UNK]",
        pad_token="[PAD]",
        cls_token="[CLS]",
        sep_token="[SEP]",
    )
    torch.manual_seed(seed)
    config = BertConfig(
        vocab_size=size,
        hidden_size=16,
        num_hidden_layers=1,
        num_attention_heads=2,
        intermediate_size=32,
        max_position_embeddings=128,
        num_labels=len(labels),
        id2label=dict(enumerate(labels)),
        label2id={label: i for i, label in enumerate(labels)},
    )
    model = BertForSequenceClassification(config).eval()
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_bart(folder: Path, words: Iterable[str], *, seed: int = 0) -> Path:
    """A BART encoder-decoder (<s> text </s>), 1 layer each side, 128 positions."""
    import torch
    from transformers import BartConfig, BartForConditionalGeneration

    tokenizer, size = _tokenizer(
        words,
        ["<s>", "<pad>", "</s>", "<unk>"],
        template="<s> $A </s>",
        pair=None,
        bos_token="<s>",
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    torch.manual_seed(seed)
    config = BartConfig(
        vocab_size=size,
        d_model=16,
        encoder_layers=1,
        decoder_layers=1,
        encoder_attention_heads=2,
        decoder_attention_heads=2,
        encoder_ffn_dim=32,
        decoder_ffn_dim=32,
        max_position_embeddings=128,
        pad_token_id=1,
        bos_token_id=0,
        eos_token_id=2,
        decoder_start_token_id=2,
        forced_eos_token_id=2,
    )
    BartForConditionalGeneration(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder


def build_t5(folder: Path, words: Iterable[str], *, seed: int = 0) -> Path:
    """A T5 encoder-decoder (text </s>), 1 layer each side; decoding starts from <pad>."""
    import torch
    from transformers import T5Config, T5ForConditionalGeneration

    tokenizer, size = _tokenizer(
        words,
        ["<pad>", "</s>", "<unk>"],
        template="$A </s>",
        pair=None,
        eos_token="</s>",
        pad_token="<pad>",
        unk_token="<unk>",
    )
    torch.manual_seed(seed)
    config = T5Config(
        vocab_size=size,
        d_model=16,
        d_kv=8,
        d_ff=32,
        num_layers=1,
        num_decoder_layers=1,
        num_heads=2,
        pad_token_id=0,
        eos_token_id=1,
        decoder_start_token_id=0,
    )
    T5ForConditionalGeneration(config).eval().save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return folder
