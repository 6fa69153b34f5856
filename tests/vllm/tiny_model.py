"""A tiny Llama for the real-engine suite, made here from nothing: random weights, a BPE tokenizer
trained on a corpus written below, and a chat template. vLLM serves it as it serves any Hub model
of the Llama architecture; its answers are nonsense, but the same at temperature 0 on every run,
which is all the suite compares.

Shape: hidden 128 with 4 heads (vLLM's CPU attention needs a head size of at least 32:
vllm/v1/attention/backends/cpu_attn.py, ``get_supported_head_sizes``), 2 layers, about 0.6 M
parameters, float32 (every CPU backend computes it; ``dtype: auto`` keeps the config's).

Run with the real-engine virtualenv's interpreter (tests/vllm/engine_venv.py), which has torch,
transformers and tokenizers: ``python -m tests.vllm.tiny_model DIR``. The directory appears whole
or not at all.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import shutil
import tempfile
from pathlib import Path

SEED = 32
VOCAB_SIZE = 1024
MAX_POSITIONS = 2048
EOS = "</s>"
BOS = "<s>"
SPECIAL_TOKENS = [BOS, EOS, "<unk>", "<|user|>", "<|assistant|>", "<|system|>"]
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}"
    "{{ '<|' + message['role'] + '|>' + message['content'] + eos_token }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|assistant|>' }}{% endif %}"
)
VOCABULARY = (
    "the a of to and in is it that for on with as was at by be this from or have an are not but "
    "one all can more when out up so what about into time has some if them two like only other new "
    "prefill decode cache block token model engine transfer request stream answer region fleet "
    "endpoint server proxy node memory layer head batch prompt weight split store master client"
)


def corpus() -> list[str]:
    """Sentences over a fixed vocabulary, with numbers and punctuation: the same on every machine."""
    words = VOCABULARY.split()
    lines = []
    for index, (first, second, third) in enumerate(itertools.product(words[:24], words[24:48], words[48:])):
        lines.append(f"{first} {second} {third} {index % 97}, {third}-{first}. {second.capitalize()}?")
    return lines


def make_tokenizer(directory: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, bos_token=BOS, eos_token=EOS, unk_token="<unk>", pad_token=EOS
    )
    fast.chat_template = CHAT_TEMPLATE
    fast.model_max_length = MAX_POSITIONS
    fast.save_pretrained(directory)


def make_weights(directory: Path, vocab_size: int, eos_id: int, bos_id: int) -> None:
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    torch.manual_seed(SEED)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=4,
        max_position_embeddings=MAX_POSITIONS,
        bos_token_id=bos_id,
        eos_token_id=eos_id,
        tie_word_embeddings=False,
        torch_dtype="float32",
    )
    model = LlamaForCausalLM(config)
    model.save_pretrained(directory, safe_serialization=True)
    # vLLM reads generation_config.json for its default sampling: none here, so requests say theirs.
    GenerationConfig(bos_token_id=bos_id, eos_token_id=eos_id).save_pretrained(directory)


def make(target: Path) -> Path:
    """Write the model into ``target`` (made whole in a staging directory beside it)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(dir=target.parent, prefix=".model."))
    try:
        make_tokenizer(staging)
        vocab = json.loads((staging / "tokenizer.json").read_text())["model"]["vocab"]
        make_weights(staging, len(vocab), vocab[EOS], vocab[BOS])
        os.chmod(staging, 0o755)
        staging.rename(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return target


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("directory", type=Path)
    make(parser.parse_args().directory)


if __name__ == "__main__":
    main()
