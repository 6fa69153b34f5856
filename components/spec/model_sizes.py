"""Sizes of the weights of models the examples serve, in bytes: BF16, two bytes per parameter, from
each model card's parameter count (rounded up). An endpoint's ``model_size`` wins over this table."""

from __future__ import annotations

KNOWN_MODEL_BYTES: dict[str, int] = {
    "Qwen/Qwen3-0.6B": 2 * 752_000_000,
    "Qwen/Qwen3-8B": 2 * 8_200_000_000,
    "meta-llama/Llama-3.1-8B-Instruct": 2 * 8_100_000_000,
    "meta-llama/Llama-3.1-70B-Instruct": 2 * 70_600_000_000,
    "meta-llama/Llama-3.1-405B-Instruct": 2 * 405_900_000_000,
}
