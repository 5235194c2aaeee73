"""A generated population of RoPE configs for the "transformers warns" checks.

:func:`population` draws, from a seeded generator, configs of several model
types with rope blocks of every method transformers validates (and one it
does not know), mixing what validators look at: factors below 1, int and
float values, crossed YaRN betas, equal Llama 3 factors, ``type`` for
``rope_type``, an ``original_max_position_embeddings`` that is missing,
equal to, or a wrong fraction of ``max_position_embeddings``, LongRoPE lists
of the wrong length. ``tests/test_transformers_warnings.py`` compares
:func:`posenc_lib.serving.transformers_warnings` on each with what
transformers 4.57.6 and 5.24.0 log; ``scripts/capture_transformers_warnings.py``
stores 5.24.0's messages. Pure Python, so that any interpreter can import it.
"""

from __future__ import annotations

import random

#: Model types whose classes both transformers 4.57.6 and 5.24.0 have, with
#: flat (not per-layer) rope blocks: some run 4.57's ``rope_config_validation``,
#: some do not (Llama 4, EXAONE 4, Mistral, Gemma 2).
MODEL_TYPES = ("llama", "qwen2", "qwen3", "qwen3_moe", "gemma", "gpt_neox",
               "ernie4_5", "smollm3", "deepseek_v3", "olmo3", "granite",
               "llama4_text", "exaone4", "mistral", "gemma2")
ROPE_TYPES = ("linear", "dynamic", "yarn", "llama3", "longrope", "default",
              "ntk_mystery")
SIZE = 300
SEED = 57


def _maybe(rng: random.Random, p: float, values):
    return rng.choice(values) if rng.random() < p else None


def _block(rng: random.Random, rope_type: str, max_len: int, half: int) -> dict:
    block: dict = {"type" if rng.random() < 0.25 else "rope_type": rope_type}
    factor = _maybe(rng, 0.9, [0.5, 1.0, 1, 2, 4, 4.0, 8.0, 16.0, 32.0])
    if factor is not None:
        block["factor"] = factor
    original = _maybe(rng, 0.7, ["max", "ratio", 1024, 4096, 8192, 32768, "float"])
    if original == "max":
        block["original_max_position_embeddings"] = max_len
    elif original == "ratio":
        block["original_max_position_embeddings"] = int(max_len // (factor or 1))
    elif original == "float":
        block["original_max_position_embeddings"] = float(max_len // 4)
    elif original is not None:
        block["original_max_position_embeddings"] = original
    if rope_type == "yarn":
        for key, values in (("beta_fast", [32, 32.0, 4.0, 1.0, 0.5]),
                            ("beta_slow", [1, 1.0, 2.0, 8.0]),
                            ("attention_factor", [0.5, 1.0, 1, -1.0, 1.2]),
                            ("mscale", [1.0, 0.707])):
            value = _maybe(rng, 0.5, values)
            if value is not None:
                block[key] = value
    if rope_type == "llama3":
        for key in ("low_freq_factor", "high_freq_factor"):
            value = _maybe(rng, 0.85, [1.0, 1, 4.0, 4, 2.0])
            if value is not None:
                block[key] = value
    if rope_type == "longrope":
        for key in ("short_factor", "long_factor"):
            length = _maybe(rng, 0.9, [half, half, half, half // 2])
            if length is not None:
                block[key] = [round(1 + rng.random(), 3) for _ in range(length)]
    return block


def population(size: int = SIZE, seed: int = SEED) -> list[dict]:
    """``size`` configs drawn with ``random.Random(seed)`` (deterministic)."""
    rng = random.Random(seed)
    out = []
    for _ in range(size):
        model_type = rng.choice(MODEL_TYPES)
        max_len = rng.choice([4096, 8192, 32768, 131072])
        config = {"model_type": model_type, "hidden_size": 64,
                  "num_attention_heads": 2, "num_key_value_heads": 1,
                  "head_dim": 32, "num_hidden_layers": 4,
                  "max_position_embeddings": max_len, "rope_theta": 10000.0}
        if model_type == "deepseek_v3":
            config.update(qk_rope_head_dim=32, qk_nope_head_dim=32, v_head_dim=32)
        if model_type == "exaone4":
            config["sliding_window"] = 16
        config["rope_scaling"] = _block(rng, rng.choice(ROPE_TYPES), max_len, 16)
        out.append(config)
    return out


#: Probe blocks each validator warns about (equal Llama 3 factors; an int
#: factor and crossed betas; a factor below 1; an int dynamic factor).
PROBE_BLOCKS = [
    {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
     "high_freq_factor": 1.0, "original_max_position_embeddings": 1024},
    {"rope_type": "yarn", "factor": 4, "beta_fast": 1.0, "beta_slow": 2.0,
     "original_max_position_embeddings": 1024},
    {"rope_type": "linear", "factor": 0.5},
    {"rope_type": "dynamic", "factor": 2},
]


def table_configs() -> list[dict]:
    """The table's rotary models as published, then each with every probe
    block (Phi-3 as published only: its classes raise on other blocks)."""
    import copy
    import warnings

    from posenc_lib.tools import inspector as model_inspect

    out = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name in model_inspect.model_names():
            config = model_inspect.model_config(name)
            if config["model_type"] in ("bloom", "t5"):
                continue
            out.append(config)
            if config["model_type"] == "phi3":
                continue
            for block in PROBE_BLOCKS:
                probe = copy.deepcopy(config)
                probe.get("text_config", probe)["rope_scaling"] = copy.deepcopy(block)
                out.append(probe)
    return out


def all_configs() -> list[dict]:
    """The generated population, then the table's configs."""
    return population() + table_configs()
