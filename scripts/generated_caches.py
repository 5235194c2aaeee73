"""The caches of transformers 5.x's newest architectures over generated
configs, for ``tests/test_generated_caches.py``.

Ten classes whose caches do not follow the usual "heads x head size per
token" rule, or whose config class rewrites the fields that size them:

- DeepSeek-V4: a window of keys on every layer, plus one compressed entry per
  ``compress_rates`` tokens on its compressed layers and the open block's
  buffers (a size that is not linear in the length);
- Qwen4-Exp: gated-DeltaNet state on its linear layers, keys, values and the
  indexer's keys on its indexed ones, a convolution state on its PLE layers;
- HRM-Text: one cache layer per attention call of its recurrent forward
  (``num_hidden_layers`` rewritten on first construction);
- MiMo-V2-Flash: a window of ``sliding_window_size + 1`` and twice the key
  heads on its sliding layers, values narrower than keys;
- Zamba2: a Mamba-2 state on every layer, keys and values on the "hybrid"
  layers that run its shared transformer block, rotated only with
  ``use_mem_rope``.
- Inkling, Inkling 2 and Inkling 2 Loop (no RoPE): keys and values on every
  layer, the sliding ones' on their own ``swa_*`` heads, and four float32
  convolution states per layer; the loop model caches its looped layers once
  per pass.
- Dots 3 Note: MLA with latent sizes of its own on its sliding layers, a RoPE
  entry per layer type, float32 indexer keys.
- Dory: a recurrent section run several times a forward, each further pass
  cached apart; a saved form with "mlp" entries and doubled layer counts.

For each, seeded random configs (the fields that size the cache, layer
patterns, legacy field names) are built by the installed transformers, in
float32 and in bfloat16 (``dtype=`` at build, as a checkpoint loads), and each
tiny model's own cache is measured after a forward over several lengths
(:func:`posenc_lib.tools.tiny_model.filled_cache`, counted by
:mod:`posenc_lib.tools.cache_walk`), and the float32 model observed as the
conformance sweep observes one (:func:`posenc_lib.tools.tiny_model.observe`:
each layer's ``apply_rotary*`` cos/sin and pairs, softmax scales, the cache's
growth). A config the class or its model refuses
is stored with the error. Run with transformers 5.x::

    python scripts/generated_caches.py --out results/generated-caches-5.json

(``make generated-caches``; about two and a half minutes.)
"""

from __future__ import annotations

import argparse
import json
import random
import sys
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

#: Configs generated per model type.
PER_TYPE = 32
CSA, HCA, SWA = ("compressed_sparse_attention", "heavily_compressed_attention",
                 "sliding_attention")


def _deepseek_v4(rng: random.Random, i: int) -> dict:
    head = rng.choice([16, 32, 64])
    index = rng.choice([8, 16, 32])
    layers = rng.randint(2, 4)
    rot = rng.choice([r for r in (4, 8, 16) if r <= min(head, index)])
    cfg = {"vocab_size": 128, "hidden_size": rng.choice([64, 128]),
           "num_attention_heads": rng.choice([2, 4]),
           "num_key_value_heads": rng.choice([1, 2]), "head_dim": head,
           "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 16, "n_routed_experts": 2,
           "num_experts_per_tok": 1, "n_shared_experts": 1, "moe_intermediate_size": 32,
           "index_n_heads": rng.choice([1, 2]), "index_head_dim": index,
           "index_topk": rng.choice([2, 64]), "hc_mult": 2, "hc_sinkhorn_iters": 2,
           "num_hidden_layers": layers,
           "sliding_window": rng.choice([1, 2, 3, 5, 8, 16] if i % 5 == 0 else
                                        [2, 3, 5, 8, 16])}
    form = i % 4
    if form == 0:  # top-level fields
        cfg.update(partial_rotary_factor=rot / head, rope_theta=rng.choice([500.0, 1e4]),
                   compress_rope_theta=rng.choice([4e4, 16e4]))
    elif form == 1:  # the legacy qk_rope_head_dim
        cfg.update(qk_rope_head_dim=rot)
    elif form == 2:  # both entries given, a top level that does not win
        cfg.update(rope_theta=123.0, partial_rotary_factor=0.5, rope_parameters={
            "main": {"rope_type": "default", "rope_theta": 3000.0,
                     "partial_rotary_factor": rot / head},
            "compress": {"rope_type": "default", "partial_rotary_factor": rot / head}})
    else:  # a flat YaRN block: the compressed layers'
        cfg.update(partial_rotary_factor=rot / head, rope_parameters={
            "rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256})
    csa, hca = rng.choice([2, 3, 4, 5, 8]), rng.choice([4, 6, 16])
    pattern = rng.random()
    if pattern < 0.6:
        cfg.update(layer_types=[rng.choice([CSA, HCA, SWA]) for _ in range(layers)],
                   compress_rates={CSA: csa, HCA: hca})
    elif pattern < 0.8:  # the class's pattern, the legacy scalar rates
        cfg.update(compress_rate_csa=csa, compress_rate_hca=hca)
    else:  # the legacy per-layer ratios
        cfg.update(compress_ratios=[rng.choice([0, 4, 128]) for _ in range(layers)])
    return cfg


def _qwen4_exp(rng: random.Random, i: int) -> dict:
    layers = rng.randint(2, 6)
    kinds = [rng.choice(["linear_attention", "indexed_attention"])
             for _ in range(layers - 1)] + ["indexed_attention"]
    rng.shuffle(kinds)
    heads = rng.choice([1, 2, 4])
    head = rng.choice([8, 16, 32])
    share = rng.choice([1.0, 0.5, 0.25])
    keys = rng.choice([1, 2])
    ratio = rng.choice([1, 2, 4])
    cfg = {"vocab_size": 64, "hidden_size": rng.choice([16, 32, 48]),
           "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": rng.choice([h for h in (1, 2, 4) if heads % h == 0]),
           "partial_rotary_factor": share, "rope_theta": rng.choice([1e4, 1e6]),
           "linear_conv_kernel_dim": rng.randint(2, 6),
           "linear_key_head_dim": rng.choice([4, 8]),
           "linear_value_head_dim": rng.choice([4, 8, 16]),
           "linear_num_key_heads": keys, "linear_num_value_heads": keys * rng.choice([1, 2]),
           "moe_intermediate_size": 8, "shared_expert_intermediate_size": 8,
           "num_experts": 2, "num_experts_per_tok": 1, "hc_count": rng.choice([2, 3]),
           "hc_lowrank": 4, "ngram_vocab_size_base": 40, "indexer_n_heads": 2,
           "indexer_kv_heads": 1, "indexer_budget": ratio * 2,
           "indexer_compress_ratio": ratio, "pad_token_id": 0, "bos_token_id": 1,
           "eos_token_id": 2}
    if i % 4 == 1:  # head_dim left out: the class's 256, not hidden / heads
        head = 256
    else:
        cfg["head_dim"] = head
    # the indexer's keys are at least the rotary part wide (the class checks)
    cfg["indexer_head_dim"] = max(int(head * share), 16) + 8 * rng.randint(0, 2)
    if i % 4 == 2:  # the checkpoint's name for an indexed layer
        kinds = ["full_attention" if k == "indexed_attention" else k for k in kinds]
    cfg["layer_types"] = kinds
    linear = [j + 1 for j, k in enumerate(kinds) if k == "linear_attention"]
    if linear and i % 3 == 0:  # per-layer embeddings on some linear layers
        ngram, per = rng.randint(2, 3), rng.randint(1, 2)
        cfg.update(ple_layer_ids=rng.sample(linear, rng.randint(1, len(linear))),
                   ngram_size=ngram, heads_per_ngram=per,
                   ple_embed_dim=(ngram - 1) * per * 2,
                   ple_conv_kernel_size=rng.randint(2, 4))
    return cfg


def _hrm_text(rng: random.Random, i: int) -> dict:
    heads = rng.choice([2, 4])
    cfg = {"vocab_size": 64, "hidden_size": 16 * heads, "num_attention_heads": heads,
           "head_dim": rng.choice([8, 16]), "intermediate_size": 32,
           "num_hidden_layers": rng.randint(1, 3), "H_cycles": rng.randint(1, 3),
           "L_cycles": rng.randint(1, 3), "prefix_lm": False}
    if i % 4 == 3:  # a saved config: the blocks per stack given beside the total
        stack = cfg["num_hidden_layers"]
        cfg.update(num_layers_per_stack=stack, num_hidden_layers=stack * cfg[
            "H_cycles"] * (cfg["L_cycles"] + 1))
    return cfg


def _mimo_v2_flash(rng: random.Random, i: int) -> dict:
    layers = rng.randint(2, 5)
    head = rng.choice([16, 32])
    cfg = {"vocab_size": 64, "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": rng.choice([1, 2]), "head_dim": head,
           "v_head_dim": rng.choice([8, head]), "intermediate_size": 32,
           "moe_intermediate_size": 16, "n_routed_experts": 2, "num_experts_per_tok": 1,
           "num_hidden_layers": layers}
    if i % 4:  # else: the class's pattern
        cfg["layer_types"] = [rng.choice(["full_attention", "sliding_attention"])
                              for _ in range(layers)]
    if i % 3 == 0:
        cfg["sliding_window_size"] = rng.choice([3, 6, 9])
    elif i % 3 == 1:
        cfg["sliding_window"] = rng.choice([4, 7])
    else:  # both: the class takes sliding_window_size + 1
        cfg.update(sliding_window=rng.choice([4, 7]), sliding_window_size=5)
    return cfg


def _zamba2(rng: random.Random, i: int) -> dict:
    layers = rng.randint(2, 6)
    kinds = [rng.choice(["linear_attention", "hybrid"]) for _ in range(layers)]
    kinds[rng.randrange(layers)] = "hybrid"  # the shared block runs somewhere
    hidden, heads = rng.choice([32, 64]), rng.choice([2, 4])
    cfg = {"vocab_size": 64, "hidden_size": hidden, "num_attention_heads": heads,
           "num_hidden_layers": layers, "layers_block_type": kinds,
           "mamba_d_state": rng.choice([8, 16]), "mamba_d_conv": rng.randint(2, 4),
           "mamba_expand": rng.choice([1, 2]), "mamba_ngroups": rng.choice([1, 2]),
           "n_mamba_heads": rng.choice([2, 4]), "use_mamba_kernels": False,
           "chunk_size": 8, "use_mem_rope": i % 2 == 0, "intermediate_size": 32}
    if i % 3 == 0:
        cfg["num_key_value_heads"] = rng.choice([h for h in (1, 2, 4) if heads % h == 0])
    if i % 4 == 1:  # 4.57.6's name for a Mamba-2 layer
        cfg["layers_block_type"] = ["mamba" if k == "linear_attention" else k
                                    for k in kinds]
    return cfg


def _inkling(version: str):
    """Inkling's text models: both layer kinds' heads and head sizes, windows
    from 1 (the cache then keeps every token) to past the lengths measured,
    kernels from 1, layer types given, left to the class's rule, or (v1) given
    as ``local_layer_ids``; the class's aliases ``sliding_window`` and
    ``sconv_kernel_size`` beside or instead of their fields; Inkling 2 Loop's
    looped layers (a ``loop_config`` or the flat fields, ending at or past the
    last layer)."""
    def generate(rng: random.Random, i: int) -> dict:
        heads, sheads = rng.choice([2, 4]), rng.choice([2, 4, 6])
        layers = rng.randint(1, 7)
        cfg = {"vocab_size": 64, "eos_token_id": 2, "hidden_size": rng.choice([16, 32, 48]),
               "num_attention_heads": heads,
               "num_key_value_heads": rng.choice([k for k in (1, 2, 4) if heads % k == 0]),
               "head_dim": rng.choice([4, 8, 16]), "swa_num_attention_heads": sheads,
               "swa_num_key_value_heads": rng.choice([k for k in (1, 2, 3, 6)
                                                      if sheads % k == 0]),
               "swa_head_dim": rng.choice([2, 6, 8]), "d_rel": rng.choice([2, 4]),
               "rel_extent": rng.choice([3, 16, 50]), "moe_intermediate_size": 8,
               "n_routed_experts": 2, "num_experts_per_tok": 1, "num_hidden_layers": layers}
        window = rng.choice([1, 2, 3, 5, 8, 13, 64])
        if i % 3 == 0:
            cfg["sliding_window_size"] = window
        elif i % 3 == 1:
            cfg["sliding_window"] = window
        else:  # both: the alias wins
            cfg.update(sliding_window=window, sliding_window_size=rng.choice([4, 9]))
        kernel = rng.choice([1, 2, 3, 4, 6])
        cfg["sconv_kernel_size" if i % 4 == 1 else "conv_kernel_size"] = kernel
        if i % 8 == 5:  # both: the alias wins
            cfg["conv_kernel_size"] = 5
        if version == "v2_loop":  # at least one block before the looped ones
            block = rng.choice([1, 2, 3])
            layers = rng.randint(2 * block, 8)
            start = block * rng.randint(1, (layers - block) // block)
            end = start + block * rng.randint(1, max(1, (layers - start) // block))
            passes = rng.choice([1, 2, 3])
            if i % 7 == 3:  # ending past the last layer: two passes run
                end, passes = (layers // block + 1) * block, 2
            cfg.update(num_hidden_layers=layers, n_layers_per_attn_res_block=block,
                       loop_gate_rank=4)
            if i % 5 == 2:
                cfg["loop_config"] = {"core_start": start, "core_end": end,
                                      "num_passes": passes}
            else:
                cfg.update(loop_layer_index_start=start, loop_layer_index_end=end,
                           loop_num_passes=passes)
        how = i % 4
        if how == 1:
            cfg["layer_types"] = [rng.choice(["hybrid", "hybrid_sliding"])
                                  for _ in range(layers)]
        elif how == 2:
            cfg["layer_types"] = ["hybrid_sliding"] * layers
        elif how == 3 and version == "v1":
            cfg["local_layer_ids"] = sorted(rng.sample(range(layers),
                                                       rng.randint(0, layers)))
        elif how == 3:  # Inkling 2 ignores it
            cfg.update(num_hidden_layers=max(layers, 6), local_layer_ids=[0])
        if version == "v1":
            cfg.update(intermediate_size=16, n_shared_experts=1,
                       log_scaling_n_floor=rng.choice([None, 4]))
        else:
            cfg.update(unpadded_vocab_size=60, log_scaling_n_floor=rng.choice([4, 128000]))
        return cfg
    return generate


def _dots3_note(rng: random.Random, i: int) -> dict:
    """Dots 3 Note's text model: the released checkpoint's keywords (``swa_*``
    sizes, ``swa_rope_theta``, ``use_dsa``, ``use_sliding_window``,
    ``sliding_window_size``) or the saved form (``per_layer_config``, one
    ``rope_parameters`` entry per layer type), a flat ``rope_parameters``
    copied to every type, given layer types renamed by ``use_dsa``."""
    layers = rng.randint(2, 7)
    heads = rng.choice([2, 4])
    rot = rng.choice([4, 8])
    nope = rng.choice([8, 16])
    cfg = {"vocab_size": 64, "hidden_size": rng.choice([32, 64]),
           "num_hidden_layers": layers, "num_attention_heads": heads,
           "num_key_value_heads": heads, "q_lora_rank": rng.choice([8, 16]),
           "kv_lora_rank": rng.choice([8, 16]), "qk_nope_head_dim": nope,
           "qk_rope_head_dim": rot, "v_head_dim": 8,
           "head_dim": rng.choice([nope + rot, 4 * rot, 2 * rot]),
           "index_head_dim": 16, "index_n_heads": 2, "index_topk": 4,
           "n_routed_experts": 2, "num_experts_per_tok": 1, "n_group": 1,
           "topk_group": 1, "moe_intermediate_size": 8, "intermediate_size": 16,
           "shared_experts_intermediate_size": 8, "n_shared_experts": 1,
           "pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    swa_nope, swa_rot = rng.choice([8, 16]), rng.choice([4, 8])
    swa_heads = rng.choice([2, 4])
    swa = {"num_attention_heads": swa_heads, "num_key_value_heads": swa_heads,
           "q_lora_rank": 8, "kv_lora_rank": rng.choice([8, 24]),
           "head_dim": swa_nope + swa_rot, "qk_nope_head_dim": swa_nope,
           "v_head_dim": 8}
    form = i % 4
    window = rng.choice([2, 3, 5, 9, 16])
    if form in (0, 1):  # the released checkpoint's keywords
        cfg.update({f"swa_{k}": v for k, v in swa.items()})
        if rng.random() < 0.5:
            cfg["swa_qk_rope_head_dim"] = swa_rot
        if rng.random() < 0.5:
            cfg["swa_rope_theta"] = rng.choice([1e4, 5e5])
        if rng.random() < 0.5:
            cfg["rope_theta"] = rng.choice([1e6, 3e7])
        cfg["sliding_window_size" if form == 0 else "sliding_window"] = window
        if i % 8 == 1:
            cfg["use_dsa"] = False
        if i % 8 == 5:
            cfg["use_sliding_window"] = False
        if i % 8 == 4:  # given layer types, in the legacy name for DSA layers
            cfg["layer_types"] = [rng.choice(["full_attention", "sliding_attention"])
                                  for _ in range(layers)]
    else:  # the saved form: per_layer_config and per-type entries
        kinds = [rng.choice(["indexed_attention", "sliding_attention"])
                 for _ in range(layers)]
        kinds[0] = "indexed_attention"
        cfg.update(layer_types=kinds, sliding_window=window,
                   per_layer_config={str(j): {**swa, "qk_rope_head_dim": swa_rot}
                                     for j, k in enumerate(kinds)
                                     if k == "sliding_attention"})
        if form == 2:
            cfg["rope_parameters"] = {
                k: {"rope_type": "default", "rope_theta": rng.choice([1e4, 1e6])}
                for k in sorted(set(kinds))}
        else:  # one flat entry, copied to each type (its share overwritten)
            cfg["rope_parameters"] = {"rope_type": "default",
                                      "rope_theta": rng.choice([1e4, 1e6]),
                                      "partial_rotary_factor": 0.5}
    return cfg


def _dory(rng: random.Random, i: int) -> dict:
    """Dory: input, recurrent and output sections (each possibly empty), one to
    three passes, per_loop or last_loop caches, windows from 1, layer types
    given or the class's, per-type bases given or the class's, in the form a
    user writes and in the saved form (an "mlp" after each layer type and
    doubled counts, with and without n_recurrent_layers)."""
    first, middle, last = (rng.randint(0, 3) for _ in range(3))
    middle = max(middle, 1 if first + last == 0 else middle)
    layers = first + middle + last
    heads = rng.choice([2, 4])
    cfg = {"vocab_size": 64, "hidden_size": 32, "num_attention_heads": heads,
           "num_key_value_heads": rng.choice([k for k in (1, 2, 4) if heads % k == 0]),
           "head_dim": rng.choice([4, 8, 16]), "intermediate_size": 32,
           "num_hidden_layers": layers, "n_input_layers": first,
           "n_recurrent_layers": middle, "n_output_layers": last,
           "n_recurrent_loops": rng.randint(1, 3),
           "sliding_window": rng.choice([1, 2, 3, 5, 8, 17]),
           "recurrent_kv_cache_mode": "last_loop" if i % 5 == 2 else "per_loop"}
    kinds = None
    if i % 3:
        kinds = [rng.choice(["full_attention", "sliding_attention"])
                 for _ in range(layers)]
        cfg["layer_types"] = kinds
    if i % 4 == 1:
        present = set(kinds or ["full_attention" if (j + 1) % 4 == 0 else
                                "sliding_attention" for j in range(layers)])
        cfg["rope_parameters"] = {k: {"rope_type": "default",
                                      "rope_theta": rng.choice([100.0, 5e3, 1e6])}
                                  for k in sorted(present)}
    if i % 3 == 1 and i % 2:  # the saved form: "mlp" entries, doubled counts
        cfg["layer_types"] = [x for k in kinds for x in (k, "mlp")]
        for key in ("num_hidden_layers", "n_input_layers", "n_recurrent_layers",
                    "n_output_layers"):
            cfg[key] *= 2
        if i % 4 == 3:
            del cfg["n_recurrent_layers"]
    elif i % 6 == 0:
        del cfg["n_recurrent_layers"]
    return cfg


GENERATORS = {"deepseek_v4": _deepseek_v4, "qwen4_exp_text": _qwen4_exp,
              "hrm_text": _hrm_text, "mimo_v2_flash": _mimo_v2_flash,
              "zamba2": _zamba2, "inkling_text": _inkling("v1"),
              "inkling2_text": _inkling("v2"), "inkling2_loop_text": _inkling("v2_loop"),
              "dots3_note_text": _dots3_note, "dory": _dory}


def cases(per_type: int = PER_TYPE) -> list[tuple[str, dict, list[int]]]:
    """``(model_type, config fields, lengths)``: the same under any interpreter
    (one seeded ``random.Random`` per type and index)."""
    out = []
    for model_type, generate in GENERATORS.items():
        for i in range(per_type):
            rng = random.Random(f"{model_type}/{i}")
            fields = generate(rng, i)
            lengths = sorted(rng.sample(range(1, 41), 4))
            out.append((model_type, fields, lengths))
    return out


def measure(model_type: str, fields: dict, lengths: list[int]) -> dict:
    """What one case's tiny model caches: per dtype and length, the bytes of
    keys and values and of the other state (or the error that stopped it)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM

    from posenc_lib.tools import tiny_model

    out: dict = {"model_type": model_type, "config": fields, "measured": {}}
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for name, dtype in (("float32", torch.float32), ("bfloat16", torch.bfloat16)):
                built = AutoConfig.for_model(model_type, **json.loads(json.dumps(fields)))
                torch.manual_seed(0)
                model = AutoModelForCausalLM.from_config(built, dtype=dtype).eval()
                out["measured"][name] = tiny_model.cache_rows(model, built, lengths)
                if dtype == torch.float32:  # the rotary calls, scales and cache
                    built._attn_implementation = "eager"
                    out["observed"] = tiny_model._jsonable(
                        tiny_model.observe(model, built, model_type)["observed"])
    except Exception as error:  # noqa: BLE001 -- the class or its model refuses it
        out["error"] = f"{type(error).__name__}: {str(error)[:280]}"
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--per-type", type=int, default=PER_TYPE)
    args = parser.parse_args(argv)
    import torch
    import transformers
    from tqdm.auto import tqdm

    transformers.logging.set_verbosity_error()
    start = time.time()
    found = [measure(*case) for case in tqdm(cases(args.per_type),
                                             desc="generated caches")]
    result = {"command": f"python scripts/generated_caches.py --per-type "
                         f"{args.per_type} (transformers {transformers.__version__})",
              "transformers": transformers.__version__, "torch": torch.__version__,
              "per_type": args.per_type, "seconds": round(time.time() - start, 1),
              "cases": found}
    failed = [(c["model_type"], c["error"][:80]) for c in found if "error" in c]
    print(f"{len(found) - len(failed)} of {len(found)} cases measured"
          + "".join(f"\n  refused: {t}: {e}" for t, e in failed))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")
        print(f"-> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
