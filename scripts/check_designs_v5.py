"""Check tests/test_designs.py's transcriptions against transformers 5.x itself.

The unit tests run with transformers 4.57.6, which has neither the
``"proportional"`` rope type nor Mistral 4. This script runs in a separate
environment with transformers 5.24.0 and torch 2.13.0::

    python3 -m venv /tmp/venv5 && /tmp/venv5/bin/pip install torch==2.13.0 transformers==5.24.0
    PYTHONPATH=. /tmp/venv5/bin/python scripts/check_designs_v5.py --out results/designs_v5.json

(``make designs-v5`` runs it with ``.cache/transformers5-venv/bin/python`` and
scripts/probe_conventions.py after it.) With ``--out`` it stores what 5.x computed,
so that tests/test_conventions.py can check the library against it where no 5.x is
installed (CI): the ``"proportional"`` frequencies of every case, as float64 lists.

It checks

1. the transcription ``proportional_524`` in tests/test_designs.py (read from that
   file, not copied) against ``_compute_proportional_rope_parameters``, on random
   head sizes, fractions, bases and factors;
2. :func:`posenc_lib.designs.proportional_inv_freq` against the same function;
3. the ``"trailing"`` convention of :func:`posenc_lib.designs.rotation_plan`
   against ``Mistral4Attention`` (``modeling_mistral4.py``): the attention weights
   of the real module, against weights computed from the module's own projections
   rotated by the plan.

It exits non-zero on the first mismatch and prints what it compared.
"""

from __future__ import annotations

import ast
import math
import random
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import transformers
from transformers import Mistral4Config, PretrainedConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.mistral4 import modeling_mistral4

from posenc_lib import designs

EPS32 = torch.finfo(torch.float32).eps


def transcription():
    """``proportional_524`` as written in tests/test_designs.py."""
    source = (ROOT / "tests" / "test_designs.py").read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == "proportional_524":
            namespace: dict = {}
            exec(compile(ast.Module([node], []), "test_designs.py", "exec"), namespace)  # noqa: S102
            return namespace["proportional_524"]
    raise SystemExit("proportional_524 not found in tests/test_designs.py")


def check_proportional(rng: random.Random, stored: list | None = None) -> int:
    reference = transcription()
    function = ROPE_INIT_FUNCTIONS["proportional"]
    cases = [(512, 0.25, 1e6, 1.0), (256, 0.25, 1e6, 1.0), (64, 1.0, 1e4, 2.0)]
    cases += [(2 * rng.randint(1, 256), rng.uniform(0.01, 1.0),
               10 ** rng.uniform(2, 7), rng.choice([1.0, 2.0, 8.0])) for _ in range(200)]
    for head_dim, p, base, factor in cases:
        config = PretrainedConfig()
        config.hidden_size, config.num_attention_heads, config.head_dim = head_dim, 1, head_dim
        config.rope_parameters = {"rope_type": "proportional", "rope_theta": base,
                                  "partial_rotary_factor": p, "factor": factor}
        real, attention_factor = function(config)
        assert attention_factor == 1.0
        real = real.double()
        if stored is not None and len(stored) < 43:  # the three fixed and 40 random
            stored.append({"head_dim": head_dim, "partial_rotary_factor": p, "base": base,
                           "factor": factor, "inv_freq": real.tolist()})
        # transformers computes in float32: one rounding of the power, the division
        # and the float32 base; relative error <= (2 + ln base)·eps32
        tol = (4 + math.log(base)) * EPS32
        for name, ours in (("transcription", torch.tensor(reference(head_dim, base, p, factor),
                                                          dtype=torch.float64)),
                           ("posenc_lib", designs.proportional_inv_freq(
                               head_dim, p, base, factor=factor, dtype=torch.float64))):
            if ours.shape != real.shape or not torch.allclose(ours, real, rtol=tol, atol=0):
                raise SystemExit(f"{name} differs from 5.x for head_dim={head_dim}, "
                                 f"p={p}, base={base}, factor={factor}")
            assert torch.equal(ours == 0, real == 0)
    return len(cases)


def check_mistral4(nope: int, rope_dim: int, n: int = 24) -> float:
    heads = 2
    config = Mistral4Config(
        hidden_size=64, num_attention_heads=heads, num_key_value_heads=heads,
        q_lora_rank=None, kv_lora_rank=16, qk_rope_head_dim=rope_dim,
        qk_nope_head_dim=nope, v_head_dim=8, num_hidden_layers=1,
        max_position_embeddings=8192,
        # YaRN as in the published config, with factor 1: the plain frequencies over
        # the rotated slice (Mistral4RotaryEmbedding's own "default" branch spaces
        # them over the whole head and does not fit the slice)
        rope_parameters={"rope_type": "yarn", "rope_theta": 1e4, "factor": 1.0,
                         "original_max_position_embeddings": 8192,
                         "beta_fast": 32.0, "beta_slow": 1.0, "mscale": 1.0,
                         "mscale_all_dim": 1.0, "llama_4_scaling_beta": 0.1},
        attn_implementation="eager")
    assert config.rope_interleave  # the default: adjacent pairs
    torch.manual_seed(nope + rope_dim)
    attention = modeling_mistral4.Mistral4Attention(config, layer_idx=0).double().eval()
    rotary = modeling_mistral4.Mistral4RotaryEmbedding(config)
    hidden = torch.randn(1, n, 64, dtype=torch.float64)
    positions = torch.arange(n)[None]
    causal = torch.ones(n, n, dtype=torch.bool).tril()
    mask = torch.zeros(1, 1, n, n, dtype=torch.float64).masked_fill(~causal, -math.inf)
    with torch.no_grad():
        cos, sin = rotary(hidden, positions)
        _, weights_ref = attention(hidden, (cos, sin), mask, positions)
        # the same projections, not yet rotated, laid out as the module lays them
        q = attention.q_proj(hidden).view(1, n, heads, -1).transpose(1, 2)
        kv = attention.kv_a_proj_with_mqa(hidden)
        kv_pass, k_rot = torch.split(kv, [config.kv_lora_rank, rope_dim], dim=-1)
        k_nope = attention.kv_b_proj(attention.kv_a_layernorm(kv_pass))
        k_nope = k_nope.view(1, n, heads, -1).transpose(1, 2)[..., :nope]
        k = torch.cat([k_nope, k_rot[:, None].expand(1, heads, n, rope_dim)], dim=-1)
    plan = designs.rotation_plan(nope + rope_dim, rope_dim / (nope + rope_dim), "trailing",
                                 1e4)
    scores = designs.apply_plan(q, torch.arange(n), plan) @ designs.apply_plan(
        k, torch.arange(n), plan).mT * attention.scaling
    weights = torch.softmax(scores.masked_fill(~causal, -math.inf), dim=-1)
    error = float((weights - weights_ref).abs().max())
    largest = float(scores.abs().max())
    tol = 4 * n * EPS32 * largest + (largest + n + 4) * EPS32  # float32 angles, softmax
    if error > tol:
        raise SystemExit(f"Mistral 4 (nope={nope}, rope={rope_dim}): weights differ by "
                         f"{error:.3g} > {tol:.3g}")
    other = designs.rotation_plan(nope + rope_dim, rope_dim / (nope + rope_dim), "partial",
                                  1e4)
    wrong = designs.apply_plan(q, torch.arange(n), other) @ designs.apply_plan(
        k, torch.arange(n), other).mT * attention.scaling
    wrong = torch.softmax(wrong.masked_fill(~causal, -math.inf), dim=-1)
    assert float((wrong - weights_ref).abs().max()) > 100 * tol, "the check cannot fail"
    return error


def main() -> int:
    import argparse
    import json

    parser = argparse.ArgumentParser(description="check posenc_lib.designs against 5.x")
    parser.add_argument("--out", type=Path, help="store 5.x's proportional frequencies")
    args = parser.parse_args()
    print(f"transformers {transformers.__version__}, torch {torch.__version__}")
    if not transformers.__version__.startswith("5."):
        raise SystemExit("this script needs transformers 5.x")
    stored: list = []
    count = check_proportional(random.Random(0), stored)
    print(f"proportional: transcription and posenc_lib match 5.x on {count} cases")
    for nope, rope_dim in ((64, 64), (32, 16), (16, 48)):
        error = check_mistral4(nope, rope_dim)
        print(f"Mistral 4 nope={nope} rope={rope_dim}: trailing plan matches "
              f"(max weight difference {error:.2e})")
    if args.out is not None:
        args.out.write_text(json.dumps({"transformers": transformers.__version__,
                                        "torch": torch.__version__,
                                        "proportional": stored}) + "\n")
        print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
