"""make engines: run llama.cpp (through llama-cpp-python) on tiny random
transformers models converted by llama.cpp's own converter, and compare its
logits with transformers: on each case, the agreements AND the divergences that
posenc_lib.tools.engines predicts, and write every figure to results/engines.json.

Runs in the project's venv (torch, transformers); the converter comes from
the vendored llama.cpp tree of the llama-cpp-python source distribution
(its gguf-py on sys.path, nothing installed), and llama.cpp runs in the
separate venv given by --engine-python. Not part of make test.

Each case names a prediction (posenc_lib.tools.engines: llama_cpp_params and its
notes): "agree" (llama.cpp's logits are transformers' within float32 rounding,
1e-3 of the logit scale) or "differ" (more than 10x that from transformers',
and within 1e-3 of transformers run on the config llama.cpp effectively
reads: the prediction's own reference). Heads are 64 wide (at 16 the YaRN
ramp spans 4 pairs).
"""

import argparse
import copy
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ORIG = 64  # the tiny models' original context; logits are compared up to 4x
N_TOKENS = 4 * ORIG

RUNNER = r'''
import sys, json, numpy as np
from llama_cpp import Llama
gguf, tokens, out = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
n_ctx = int(sys.argv[4]) if len(sys.argv) > 4 else len(tokens)
llm = Llama(model_path=gguf, n_ctx=n_ctx, n_batch=len(tokens), n_ubatch=len(tokens),
            logits_all=True, n_threads=1, type_k=0, type_v=0, verbose=False,
            flash_attn=False)
llm.eval(tokens)
np.save(out, np.array(llm.scores[:len(tokens)], dtype=np.float64))
'''

# Context shift: drop the first K cached tokens, shift the rest by -K (llama.cpp
# re-rotates the cached keys, build_rope_shift), decode one more token, and
# compare its logits with a fresh context that never held the dropped tokens.
SHIFT_RUNNER = r'''
import sys, json, numpy as np
import llama_cpp
from llama_cpp import Llama
gguf, tokens, k = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
kw = dict(n_ctx=len(tokens), n_batch=len(tokens), n_ubatch=len(tokens), logits_all=True,
          n_threads=1, type_k=0, type_v=0, verbose=False, flash_attn=False)
llm = Llama(model_path=gguf, **kw)
llm.eval(tokens[:-1])
mem = llama_cpp.llama_get_memory(llm._ctx.ctx)
if not llama_cpp.llama_memory_can_shift(mem):
    print(json.dumps("refused"))
    sys.exit(0)
llama_cpp.llama_memory_seq_rm(mem, 0, 0, k)
llama_cpp.llama_memory_seq_add(mem, 0, k, -1, -k)
llm.n_tokens = len(tokens) - 1 - k
llm.input_ids[: llm.n_tokens] = tokens[k:-1]
llm.eval(tokens[-1:])
shifted = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
fresh = Llama(model_path=gguf, **kw)
fresh.eval(tokens[k:])
ref = np.array(fresh.scores[len(tokens) - k - 1], dtype=np.float64)
print(json.dumps(float(np.abs(shifted - ref).max() / np.abs(ref).max())))
'''


def tokenizer(directory):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=300, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(["positions in transformers"] * 4, trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    fast.save_pretrained(directory)
    return len(fast)


def _common(vocab, layers):
    return {"vocab_size": vocab, "hidden_size": 256, "intermediate_size": 256,
            "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
            "head_dim": 64, "rms_norm_eps": 1e-6, "tie_word_embeddings": False,
            "dtype": "float32"}


def _yarn(**kw):
    return {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": ORIG,
            **kw}


def _phi3_factors():
    g = torch.Generator().manual_seed(5)
    return ((1 + torch.rand(32, generator=g)).tolist(),
            (1 + 6 * torch.rand(32, generator=g)).tolist())


def config_for(case, vocab, layers):
    """The transformers config of each case (heads of 64 features)."""
    from transformers import (DeepseekV2Config, Gemma3TextConfig, GptOssConfig,
                              LlamaConfig, Phi3Config, Qwen2Config, Qwen2VLConfig)

    c = _common(vocab, layers)
    if case == "llama":
        return LlamaConfig(max_position_embeddings=ORIG, rope_theta=10000.0, **c)
    if case == "llama3.1-rope-freqs":
        return LlamaConfig(max_position_embeddings=4 * ORIG, rope_theta=10000.0,
                           rope_scaling={"rope_type": "llama3", "factor": 8.0,
                                         "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                         "original_max_position_embeddings": 16}, **c)
    if case.startswith("qwen2") and case != "qwen2-vl-mrope":
        rope_scaling = None
        if case.startswith("qwen2-yarn"):
            rope_scaling = _yarn()
            if case == "qwen2-yarn-attention-factor":
                rope_scaling["attention_factor"] = 1.0
        return Qwen2Config(max_position_embeddings=4 * ORIG if rope_scaling else ORIG,
                           rope_theta=10000.0, rope_scaling=rope_scaling,
                           use_sliding_window=False, **c)
    if case.startswith("gpt-oss"):
        c.pop("intermediate_size")
        return GptOssConfig(max_position_embeddings=4 * ORIG, rope_theta=150000.0,
                            rope_scaling=_yarn(beta_fast=32.0, beta_slow=1.0,
                                               truncate=False),
                            num_local_experts=4, num_experts_per_tok=2,
                            intermediate_size=256, sliding_window=32,
                            layer_types=["sliding_attention", "full_attention"][:layers]
                            if layers > 1 else ["full_attention"], **c)
    if case.startswith("phi3"):
        short, long = _phi3_factors()
        c.pop("head_dim")
        return Phi3Config(max_position_embeddings=4 * ORIG, original_max_position_embeddings=ORIG,
                          rope_theta=10000.0, pad_token_id=0, bos_token_id=1, eos_token_id=1,
                          rope_scaling={"type": "longrope", "short_factor": short,
                                        "long_factor": long}, **c)
    if case.startswith("deepseek-v2-lite"):
        c.pop("head_dim")
        c["num_key_value_heads"] = c["num_attention_heads"]  # MLA: kv_b_proj per head
        return DeepseekV2Config(max_position_embeddings=4 * ORIG, rope_theta=10000.0,
                                rope_scaling={"type": "yarn", "factor": 4.0, "beta_fast": 32,
                                              "beta_slow": 1, "mscale": 0.707,
                                              "mscale_all_dim": 0.707,
                                              "original_max_position_embeddings": ORIG},
                                q_lora_rank=64, kv_lora_rank=64, qk_rope_head_dim=64,
                                qk_nope_head_dim=64, v_head_dim=64, n_routed_experts=4,
                                num_experts_per_tok=2, n_shared_experts=1,
                                moe_intermediate_size=64, first_k_dense_replace=layers,
                                n_group=1, topk_group=1, **c)
    if case == "gemma3":
        return Gemma3TextConfig(max_position_embeddings=4 * ORIG, rope_theta=1000000.0,
                                rope_local_base_freq=10000.0, sliding_window=32,
                                rope_scaling={"rope_type": "linear", "factor": 4.0},
                                query_pre_attn_scalar=64, **c)
    if case == "qwen2-vl-mrope":
        text = dict(c, max_position_embeddings=4 * ORIG, rope_theta=10000.0,
                    rope_scaling={"type": "mrope", "mrope_section": [8, 12, 12]})
        return Qwen2VLConfig(text_config=text, vision_config={
            "depth": 1, "embed_dim": 32, "hidden_size": 256, "num_heads": 2,
            "mlp_ratio": 2, "patch_size": 14, "spatial_merge_size": 2}, **text)
    raise ValueError(case)


def build(case, directory, layers=2):
    from transformers import AutoModelForCausalLM, Qwen2VLForConditionalGeneration

    vocab = tokenizer(directory)
    config = config_for(case, vocab, layers)
    torch.manual_seed(0)
    cls = (Qwen2VLForConditionalGeneration if case == "qwen2-vl-mrope"
           else AutoModelForCausalLM)
    model = (cls._from_config(config, dtype=torch.float32) if cls is not AutoModelForCausalLM
             else cls.from_config(config, dtype=torch.float32)).eval()
    with torch.no_grad():  # random weights larger than the init's, so positions matter
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.15 * (64 / p.shape[-1]) ** 0.5 if p.dim() > 1 else 0.15)
    model.save_pretrained(directory, safe_serialization=True)
    return model, vocab


def convert(vendor, directory, out):
    driver = (
        "import sys, runpy\n"
        f"sys.path[:0] = [{str(vendor)!r}, {str(vendor / 'gguf-py')!r}]\n"
        "import conversion.base as base\n"
        "# the tiny BPE tokenizer is not one of llama.cpp's known pre-tokenizers;\n"
        "# the vocabulary plays no part in the comparison (tokens are fed as ids)\n"
        "base.TextModel.get_vocab_base_pre = lambda self, tokenizer: 'default'\n"
        "# sentencepiece is not installed; without a tokenizer.model the converter\n"
        "# raises FileNotFoundError here and falls through to tokenizer.json\n"
        "def no_spm(self):\n"
        "    raise FileNotFoundError('no tokenizer.model')\n"
        "base.TextModel._set_vocab_sentencepiece = no_spm\n"
        "# Phi-3's converter reads only a sentencepiece vocabulary: the BPE one here\n"
        "import conversion.phi as phi\n"
        "phi.Phi3MiniModel.set_vocab = lambda self: self._set_vocab_gpt2()\n"
        f"sys.argv = ['convert_hf_to_gguf.py', {str(directory)!r}, '--outfile', {str(out)!r},"
        " '--outtype', 'f32']\n"
        f"runpy.run_path({str(vendor / 'convert_hf_to_gguf.py')!r}, run_name='__main__')\n")
    subprocess.run([sys.executable, "-c", driver], check=True, capture_output=True, text=True)


#: case: (prediction, the config change that makes transformers compute what
#: llama.cpp is predicted to compute, or None, why, and the context shift's
#: prediction: "agree" (a shifted one-layer cache gives a fresh context's
#: logits), "differ" (build_rope_shift re-rotates with attn_factor, so a net
#: factor != 1 multiplies the shifted keys again: YaRN, LongRoPE), "refused"
#: (get_can_shift false), or None (not run))
CASES = {
    "llama": ("agree", None, "NORM on the converter's permuted q/k", "agree"),
    "qwen2": ("agree", None, "NEOX", "agree"),
    "qwen2-yarn": ("agree", None, "YaRN, truncate true (the default)", "differ"),
    "qwen2-yarn-attention-factor": (
        "differ", {"drop": "attention_factor"},
        "the GGUF's yarn_attn_factor is not read: 0.1 ln 4 + 1, not the config's 1.0",
        "differ"),
    "gpt-oss-truncate-false": (
        "differ", {"set": {"truncate": True}},
        "ggml floors/ceils the correction range: truncate=false is lost; sinks, SWA", None),
    "llama3.1-rope-freqs": ("agree", None, "the converter's rope_freqs divisors", "agree"),
    "phi3-longrope": ("agree", None, "n_ctx > original: long factors, as transformers "
                      "uses for a sequence past the original", "differ"),
    "phi3-longrope-short-prompt": (
        "differ", {"long": True},
        "n_ctx > original: long factors for a prompt that fits in the original, "
        "where transformers uses the short ones", None),
    "deepseek-v2-lite-mla": (
        "differ", {"softmax_mscale2": (0.1 * 0.707 * math.log(4.0) + 1) ** 2},
        "yarn_log_mul 0.1 * 0.707 round trip, mscale = mscale_all_dim, and kq_scale "
        "carries mscale(4, 0.707)^2, which transformers 4.57.6's DeepseekV2Attention "
        "leaves out (modeling_deepseek_v2.py line 336; its DeepseekV3Attention applies "
        "it): the reference is transformers' model with that factor on its scaling",
        "agree"),
    "gemma3": ("agree", None, "two bases (local 10,000, global 1e6 / 4), SWA", None),
    "qwen2-vl-mrope": ("agree", None, "M-RoPE sections; the cache refuses to shift",
                       "refused"),
}


def _reference(model, case, tokens, change):
    """transformers' logits on the config llama.cpp is predicted to read."""
    from transformers import AutoModelForCausalLM

    config = model.config.__class__.from_dict(model.config.to_dict())
    rs = dict(config.rope_scaling)
    if "drop" in change:
        rs.pop(change["drop"])
    rs.update(change.get("set", {}))
    config.rope_scaling = rs
    if hasattr(config, "rope_parameters"):
        config.rope_parameters = rs
    alt = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    alt.load_state_dict(model.state_dict())
    with torch.no_grad():
        return alt.eval()(torch.tensor([tokens])).logits[0].double().numpy()


def _logits(model, tokens):
    with torch.no_grad():
        out = model(input_ids=torch.tensor([tokens]))
    return out.logits[0].double().numpy()


def run_case(case, args, tokens_all):
    prediction, change, why, shift_prediction = CASES[case]
    record = {"case": case, "prediction": prediction, "why": why,
              "shift_prediction": shift_prediction}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model, vocab = build(case, tmp / "hf")
        convert(args.vendor, tmp / "hf", tmp / "m.gguf")
        tokens = [t % vocab for t in tokens_all]
        n_ctx = N_TOKENS
        if case == "phi3-longrope-short-prompt":
            tokens = tokens[:ORIG]  # fits in the original context; n_ctx stays 4x
        subprocess.run([args.engine_python, "-c", RUNNER, str(tmp / "m.gguf"),
                        json.dumps(tokens), str(tmp / "cpp.npy"), str(n_ctx)], check=True,
                       capture_output=True, text=True,
                       env={**os.environ, "OMP_NUM_THREADS": "1"})
        cpp = np.load(tmp / "cpp.npy")
        hf = _logits(model, tokens)
        if change and change.get("long"):
            # transformers with the long factors: its own code at a length past
            # the original, read over the first ORIG positions (causal)
            long_tokens = tokens + tokens_all[:ORIG + 1]
            long_tokens = [t % vocab for t in long_tokens]
            ref = _logits(model, long_tokens)[:len(tokens)]
        elif change and "softmax_mscale2" in change:
            alt = copy.deepcopy(model)
            for layer in alt.model.layers:
                layer.self_attn.scaling *= change["softmax_mscale2"]
            ref = _logits(alt, tokens)
        elif change:
            ref = _reference(model, case, tokens, change)
        else:
            ref = hf
        shift = None
        if shift_prediction is not None:
            build(case, tmp / "hf1", layers=1)
            convert(args.vendor, tmp / "hf1", tmp / "one.gguf")
        shift = None if shift_prediction is None else json.loads(subprocess.run(
            [args.engine_python, "-c", SHIFT_RUNNER, str(tmp / "one.gguf"),
             json.dumps([t % vocab for t in tokens_all]),
             str(ORIG)], check=True, capture_output=True, text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout.strip().splitlines()[-1])
    scale = float(np.abs(hf).max())
    record["vs_transformers"] = float(np.abs(cpp - hf).max() / scale)
    record["vs_prediction"] = float(np.abs(cpp - ref).max() / scale)
    record["shift_vs_fresh"] = shift
    return record


def check(record):
    """The case's assertions: the prediction, and the context shift's."""
    problems = []
    if record["prediction"] == "agree":
        if record["vs_transformers"] > AGREE:
            problems.append(f"predicted to agree, differs by {record['vs_transformers']:.2e}")
    else:
        if record["vs_transformers"] <= 10 * AGREE:
            problems.append(f"predicted to differ, differs by only "
                            f"{record['vs_transformers']:.2e}")
        if record["vs_prediction"] > AGREE:
            problems.append(f"differs from the predicted reference by "
                            f"{record['vs_prediction']:.2e}")
    shift, predicted = record["shift_vs_fresh"], record["shift_prediction"]
    if predicted == "refused":
        if shift != "refused":
            problems.append("M-RoPE cache shifted; llama.cpp refuses (get_can_shift)")
    elif predicted is not None and shift == "refused":
        problems.append("the cache refused to shift")
    elif predicted == "differ" and shift <= 10 * SHIFT_AGREE:
        problems.append(f"shift predicted to differ from a fresh context (attn_factor "
                        f"applied again), differs by {shift:.2e}")
    elif predicted == "agree" and shift > SHIFT_AGREE:
        problems.append(f"shift differs from a fresh context by {shift:.2e}")
    record["problems"] = problems
    record["passed"] = not problems
    return record


# float32 end to end in both (f32 GGUF, f32 KV cache): agreement to 1e-3 of the
# logit scale; a wrong pairing or factor moves logits by O(1) of it. A shifted
# one-layer cache re-rotates each key once more in float32: 1e-4.
AGREE, SHIFT_AGREE = 1e-3, 1e-4


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vendor", type=Path, required=True)
    parser.add_argument("--engine-python", required=True)
    parser.add_argument("--build-seconds", type=float, default=None)
    parser.add_argument("--out", type=Path, default=Path("results/engines.json"))
    parser.add_argument("--cases", nargs="*", default=list(CASES))
    parser.add_argument("--update", action="store_true",
                        help="rerun only --cases and replace their records in --out")
    args = parser.parse_args()
    from posenc_lib.tools import engines

    print(f"llama.cpp: {engines.LLAMA_CPP['repo']}@{engines.LLAMA_CPP['commit']} "
          f"(vendored by {engines.LLAMA_CPP['package']})")
    g = torch.Generator().manual_seed(1)
    tokens_all = torch.randint(2, 10**6, (N_TOKENS,), generator=g).tolist()
    records = []
    for case in args.cases:
        t0 = time.time()
        try:
            record = check(run_case(case, args, tokens_all))
        except Exception as error:  # a case that cannot be built, converted or run
            detail = getattr(error, "stderr", None) or str(error)
            record = {"case": case, "prediction": CASES[case][0], "why": CASES[case][2],
                      "shift_prediction": CASES[case][3],
                      "error": f"{type(error).__name__}: {str(detail)[-600:]}",
                      "passed": False, "problems": ["not run"]}
        record["seconds"] = round(time.time() - t0, 1)
        records.append(record)
        print(json.dumps(record), flush=True)
    if args.update and args.out.exists():
        kept = json.loads(args.out.read_text())
        rerun = {r["case"] for r in records}
        records = [r for r in kept["cases"] if r["case"] not in rerun] + records
        records.sort(key=lambda r: list(CASES).index(r["case"]))
        args.build_seconds = args.build_seconds or kept.get("build_seconds")
    result = {"ggml_commit": engines.LLAMA_CPP["commit"],
              "package": engines.LLAMA_CPP["package"],
              "build_seconds": args.build_seconds, "orig": ORIG, "n_tokens": N_TOKENS,
              "head_dim": 64, "agree": AGREE, "shift_agree": SHIFT_AGREE,
              "cases": records}
    if args.out.exists():  # vLLM's KV pages (scripts/engines/vllm_kv_pages.py) stay
        kept = json.loads(args.out.read_text())
        if "vllm_kv" in kept:
            result["vllm_kv"] = kept["vllm_kv"]
    args.out.parent.mkdir(exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    failed = [r["case"] for r in records if not r["passed"]]
    if failed:
        sys.exit(f"llama.cpp against the predictions: failed {', '.join(failed)}")
    print("llama.cpp agrees with transformers where predicted, and differs where predicted")


if __name__ == "__main__":
    main()
