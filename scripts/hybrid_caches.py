"""The caches of the hybrid models whose state the library sizes, over config
forms their classes accept, for ``tests/test_hybrid_caches.py``.

The conformance sweep builds each type once, from its class's defaults; this
script varies the fields that size a hybrid's cache (Nemotron-H's block
pattern and its legacy field names, Bamba's Mamba-2 groups and kernel,
Falcon-H1's Mamba widths and a
``sliding_window`` it does not use, RecurrentGemma's ``lru_width`` and a window
shorter than the input) and measures, with the installed transformers, what
each tiny model's own cache holds after 5 and after 12 tokens, in float32 and
in bfloat16 (:func:`posenc_lib.tools.tiny_model.filled_cache`, counted by
:mod:`posenc_lib.tools.cache_walk`). CI runs transformers 4.x, where the
tests build these models live; for 5.x the stored run is the evidence::

    python scripts/hybrid_caches.py --out results/hybrid-caches-5.json

(``make hybrid-caches``; about a minute with transformers 5.24.0.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Sizes shared by every case: small enough to build in well under a second.
TINY = {"vocab_size": 64, "hidden_size": 64, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 16, "intermediate_size": 32}
_MAMBA2 = {"ssm_state_size": 8, "mamba_num_heads": 4, "mamba_head_dim": 16,
           "chunk_size": 8, "use_mamba_kernels": False,
           "moe_intermediate_size": 16, "moe_shared_expert_intermediate_size": 16,
           "n_routed_experts": 2, "num_experts_per_tok": 1}
_FALCON = {"mamba_n_heads": 4, "mamba_d_state": 8, "mamba_chunk_size": 8,
           "mamba_n_groups": 1, "mamba_d_conv": 4}
#: ``(model_type, fields)``: each a config its class accepts.
CASES = [
    ("nemotron_h", {**_MAMBA2, "n_groups": 1, "conv_kernel": 4,
                    "hybrid_override_pattern": "M*-E"}),
    ("nemotron_h", {**_MAMBA2, "n_groups": 1, "conv_kernel": 4,
                    "mamba_ssm_cache_dtype": "bfloat16",
                    "layers_block_type": ["linear_attention", "full_attention", "mlp",
                                          "linear_attention"]}),
    ("nemotron_h", {**_MAMBA2, "mamba_n_groups": 2, "mamba_d_conv": 3,
                    "hybrid_override_pattern": "M-M*", "num_hidden_layers": 9}),
    ("nemotron_h", {**_MAMBA2, "n_groups": 2, "conv_kernel": 2,
                    "hybrid_override_pattern": "MM*M*"}),
    ("falcon_h1", {**_FALCON, "mamba_d_ssm": 128, "num_hidden_layers": 2}),
    ("falcon_h1", {**_FALCON, "mamba_d_ssm": None, "mamba_expand": 1,
                   "mamba_d_head": 32, "mamba_n_heads": 2, "sliding_window": 4,
                   "num_hidden_layers": 3}),
    ("bamba", {"mamba_n_heads": 4, "mamba_d_state": 8, "mamba_n_groups": 2,
               "mamba_d_conv": 3, "mamba_chunk_size": 8, "attn_layer_indices": [1],
               "num_hidden_layers": 3}),
    ("recurrent_gemma", {"lru_width": 96, "attention_window_size": 8,
                         "conv1d_width": 3, "num_hidden_layers": 3,
                         "block_types": ["recurrent", "attention"]}),
    ("recurrent_gemma", {"attention_window_size": 32, "conv1d_width": 4,
                         "num_hidden_layers": 4,
                         "block_types": ["attention", "recurrent"]}),
]
LENGTHS = (5, 12)


def measure(model_type: str, fields: dict) -> dict:
    """What one case's tiny model caches: per dtype and length, the bytes of
    keys and values and of the other state."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from posenc_lib.tools import tiny_model

    config = {**TINY, **fields}
    out: dict = {"model_type": model_type, "config": config, "measured": {}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            built = AutoConfig.for_model(model_type, **config)
            for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
                torch.manual_seed(0)
                model = AutoModelForCausalLM.from_config(built).eval().to(dtype)
                out["measured"][name] = tiny_model.cache_rows(model, built, LENGTHS)
    except Exception as error:  # noqa: BLE001 -- stored with the case
        out["error"] = f"{type(error).__name__}: {error}"[:300]
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    import torch
    import transformers
    from tqdm.auto import tqdm
    from transformers.utils import logging as hf_logging

    hf_logging.set_verbosity_error()  # no fast Mamba kernels installed
    start = time.time()
    cases = [measure(t, f) for t, f in tqdm(CASES, desc="hybrid caches")]
    result = {"command": f"python scripts/hybrid_caches.py (transformers "
                         f"{transformers.__version__})",
              "transformers": transformers.__version__, "torch": torch.__version__,
              "lengths": list(LENGTHS), "seconds": round(time.time() - start, 1),
              "cases": cases}
    failed = [c["model_type"] for c in cases if "error" in c]
    print(f"{len(cases) - len(failed)} of {len(cases)} cases measured"
          + (f"; failed: {failed}" if failed else ""))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"-> {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
