"""make engines: run llama.cpp (through llama-cpp-python) on tiny random
transformers models converted by llama.cpp's own converter, and compare its
logits with transformers at positions beyond the original context.

Runs in the project's venv (torch, transformers); the converter comes from
the vendored llama.cpp tree of the llama-cpp-python source distribution
(its gguf-py on sys.path, nothing installed), and llama.cpp runs in the
separate venv given by --engine-python. Not part of make test.

Cases: Llama (llama.cpp NORM, q/k permuted by the converter), Qwen2 (NEOX),
Qwen2 with YaRN, and Qwen2 with YaRN and an explicit attention_factor (which
the transcription in posenc_lib.engines predicts llama.cpp ignores).
"""

import argparse
import json
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
llm = Llama(model_path=gguf, n_ctx=len(tokens), n_batch=len(tokens), n_ubatch=len(tokens),
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
assert llama_cpp.llama_memory_can_shift(mem)
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


def build(case, directory, layers=2):
    from transformers import AutoModelForCausalLM, LlamaConfig, Qwen2Config

    vocab = tokenizer(directory)
    common = {"vocab_size": vocab, "hidden_size": 64, "intermediate_size": 128,
                  "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
                  "rms_norm_eps": 1e-6, "tie_word_embeddings": False, "dtype": "float32"}
    if case == "llama":
        config = LlamaConfig(max_position_embeddings=ORIG, rope_theta=10000.0, **common)
    else:
        rope_scaling = None
        if case.startswith("qwen2-yarn"):
            rope_scaling = {"rope_type": "yarn", "factor": 4.0,
                            "original_max_position_embeddings": ORIG}
            if case == "qwen2-yarn-attention-factor":
                rope_scaling["attention_factor"] = 1.0
        config = Qwen2Config(max_position_embeddings=4 * ORIG if rope_scaling else ORIG,
                             rope_theta=10000.0, rope_scaling=rope_scaling,
                             use_sliding_window=False, **common)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.float32).eval()
    with torch.no_grad():  # random weights larger than the init's, so positions matter
        for name, p in model.named_parameters():
            if "norm" not in name:
                p.normal_(0, 0.15)
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
        f"sys.argv = ['convert_hf_to_gguf.py', {str(directory)!r}, '--outfile', {str(out)!r},"
        " '--outtype', 'f32']\n"
        f"runpy.run_path({str(vendor / 'convert_hf_to_gguf.py')!r}, run_name='__main__')\n")
    subprocess.run([sys.executable, "-c", driver], check=True, capture_output=True)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--vendor", type=Path, required=True)
    parser.add_argument("--engine-python", required=True)
    args = parser.parse_args()
    from posenc_lib import engines

    print(f"llama.cpp: {engines.LLAMA_CPP['repo']}@{engines.LLAMA_CPP['commit']} "
          f"(vendored by {engines.LLAMA_CPP['package']})")
    failed = []
    for case in ("llama", "qwen2", "qwen2-yarn", "qwen2-yarn-attention-factor"):
        t0 = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            tmp = Path(tmp)
            model, vocab = build(case, tmp / "hf")
            convert(args.vendor, tmp / "hf", tmp / "m.gguf")
            g = torch.Generator().manual_seed(1)
            tokens = torch.randint(2, vocab, (N_TOKENS,), generator=g).tolist()
            subprocess.run([args.engine_python, "-c", RUNNER, str(tmp / "m.gguf"),
                            json.dumps(tokens), str(tmp / "cpp.npy")], check=True,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
            cpp = np.load(tmp / "cpp.npy")
            # one layer: its cached keys depend on their own token only, so a
            # shifted cache should equal a fresh one up to the re-rotation
            build(case, tmp / "hf1", layers=1)
            convert(args.vendor, tmp / "hf1", tmp / "one.gguf")
            shift = json.loads(subprocess.run(
                [args.engine_python, "-c", SHIFT_RUNNER, str(tmp / "one.gguf"),
                 json.dumps(tokens), str(ORIG)], check=True, capture_output=True,
                text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}).stdout.strip())
            with torch.no_grad():
                hf = model(torch.tensor([tokens])).logits[0].double().numpy()
            ref = hf
            if case == "qwen2-yarn-attention-factor":
                # the prediction: llama.cpp applies 0.1 ln 4 + 1, not the config's 1.0
                model.config.rope_scaling.pop("attention_factor")
                model.config.rope_parameters = model.config.rope_scaling
                from transformers import AutoModelForCausalLM
                alt = AutoModelForCausalLM.from_config(model.config, dtype=torch.float32)
                alt.load_state_dict(model.state_dict())
                with torch.no_grad():
                    ref = alt.eval()(torch.tensor([tokens])).logits[0].double().numpy()
        scale = np.abs(hf).max()
        beyond = slice(ORIG, N_TOKENS)
        d_hf = np.abs(cpp - hf)[beyond].max() / scale
        d_ref = np.abs(cpp - ref)[beyond].max() / scale
        pairs = engines.llama_cpp_pairs("llama" if case == "llama" else "qwen2")
        line = (f"{case:28} llama.cpp {pairs:4}: max |logit diff| / max |logit| at positions "
                f"{ORIG}-{N_TOKENS - 1}: vs transformers {d_hf:.2e}")
        if ref is not hf:
            line += f"; vs transformers without attention_factor {d_ref:.2e}"
        print(line + f"  ({time.time() - t0:.0f} s)", flush=True)
        print(f"{'':28} one layer, after a context shift by {ORIG}: max |logit diff| / "
              f"max |logit| vs a fresh context {shift:.2e}", flush=True)
        # float32 end to end in both (f32 GGUF, f32 KV cache): agreement to 1e-3
        # of the logit scale; a wrong pairing or factor moves logits by O(1) of it
        if d_ref > 1e-3:
            failed.append(case)
        # without YaRN a shifted one-layer cache is the fresh one up to float32
        # re-rotation; under YaRN the shift multiplies the keys by the factor
        # again (posenc_lib.engines: build_rope_shift passes attn_factor), a
        # difference this script reports rather than fails on
        if "yarn" not in case and shift > 1e-4:
            failed.append(case + " (context shift)")
    if failed:
        sys.exit(f"llama.cpp disagrees with transformers: {', '.join(failed)}")
    print("llama.cpp agrees with transformers (and with the transcriptions' prediction)")


if __name__ == "__main__":
    main()
