"""Check the engines recipe's source citations against the engines' own release
files: vLLM 0.33.0's and SGLang 0.5.23's wheels from PyPI, and the llama.cpp
tree (``0c1e57098``) that llama-cpp-python 0.3.36's source distribution
vendors. Writes ``results/engine_citations.json``; ``tests/test_engine_citations.py``
checks that the stored run covers today's transcriptions and citations.

What is checked, for every entry:

* :data:`posenc_lib.tools.engines.VLLM_PAIRS` and ``SGLANG_PAIRS``: the cited
  line of the cited model file starts with the transcribed code, and where
  that line lies inside a ``get_rope(...)`` call, the ``is_neox_style`` the call
  passes (read from the file's syntax tree: a literal, another expression, or
  absent, i.e. ``get_rope``'s default) agrees with the transcribed value;
* :data:`CITATIONS`: each ``(engine, path, first, last, needle)`` names a span
  of lines that the recipe cites, and the needle occurs within it.

Usage (downloads are a few hundred MB; nothing is installed)::

    pip download --no-deps --only-binary :all: vllm==0.33.0 -d DL
    pip download --no-deps --only-binary :all: --python-version 3.11 sglang==0.5.23 -d DL
    pip download --no-deps --no-binary :all: llama-cpp-python==0.3.36 -d DL
    PYTHONPATH=. python scripts/engines/check_citations.py \
        --vllm-wheel DL/vllm-0.33.0-*.whl --sglang-wheel DL/sglang-0.5.23-*.whl \
        --llama-cpp-sdist DL/llama_cpp_python-0.3.36.tar.gz \
        --out results/engine_citations.json
"""

from __future__ import annotations

import argparse
import ast
import hashlib
import json
import re
import sys
import tarfile
import zipfile
from pathlib import Path

VLLM_LAYERS = "vllm/model_executor/layers/rotary_embedding/"
VLLM_MODELS = "vllm/model_executor/models/"
SGL = "sglang/srt/"
SGL_LAYERS = SGL + "layers/rotary_embedding/"

#: The spans of engine source that book/recipes/engines.ipynb (and the other
#: recipes) cite, each with a string that must occur in it.
CITATIONS: list[tuple[str, str, int, int, str]] = [
    # vLLM 0.33.0
    ("vllm", VLLM_LAYERS + "__init__.py", 35, 35, "is_neox_style: bool = True"),
    ("vllm", VLLM_MODELS + "llama4.py", 805, 840, "def permute_qk_weight_for_rotary"),
    ("vllm", VLLM_MODELS + "llama4.py", 805, 840,
     ".view(n_heads, f_out // n_heads // 2, 2, f_in)"),
    ("vllm", VLLM_MODELS + "deepseek_v2.py", 1126, 1126, "is_neox_style=False,"),
    ("vllm", VLLM_MODELS + "deepseek_v2.py", 1115, 1136, '"deepseek_yarn"'),
    ("vllm", VLLM_MODELS + "deepseek_v2.py", 1115, 1136,
     "self.scaling = self.scaling * mscale * mscale"),
    ("vllm", VLLM_MODELS + "gpt_oss.py", 111, 127,
     '"truncate": config.rope_parameters.get("truncate", True),'),
    ("vllm", VLLM_LAYERS + "yarn_scaling_rope.py", 38, 39, "attention_factor"),
    ("vllm", VLLM_LAYERS + "dynamic_ntk_scaling_rope.py", 53, 73,
     "max_trained_positions"),
    ("vllm", VLLM_LAYERS + "__init__.py", 212, 242, "max_trained_positions"),
    ("vllm", VLLM_LAYERS + "phi3_long_rope_scaled_rope.py", 51, 55, "max_model_len"),
    ("vllm", "vllm/model_executor/layers/attention/mla_attention.py", 480, 485,
     "self.head_size = kv_lora_rank + qk_rope_head_dim"),
    ("vllm", "vllm/model_executor/layers/attention/mla_attention.py", 480, 485,
     "self.num_kv_heads = 1"),
    ("vllm", "vllm/model_executor/layers/attention/mla_attention.py", 1371, 1388,
     "def get_kv_cache_spec"),
    ("vllm", "vllm/v1/kv_cache_interface.py", 729, 747, "class MLAAttentionSpec"),
    ("vllm", "vllm/v1/kv_cache_interface.py", 729, 747, "head_size_v: int = 0"),
    ("vllm", "vllm/utils/torch_utils.py", 40, 57, '"fp8_e5m2": torch.uint8,'),
    ("vllm", "vllm/config/cache.py", 185, 185, "DEFAULT_BLOCK_SIZE: ClassVar[int] = 16"),
    ("vllm", "vllm/v1/attention/backend.py", 155, 163,
     "if cls.supports_block_size(default_block_size):"),
    ("vllm", "vllm/v1/attention/backends/mla/flashinfer_mla.py", 204, 205,
     "return [32, 64]"),
    ("vllm", "vllm/v1/attention/backends/mla/flashmla.py", 57, 58, "return [64]"),
    ("vllm", "vllm/v1/attention/backends/mla/flashattn_mla.py", 49, 50,
     "return [MultipleOf(16)]"),
    # SGLang 0.5.23
    ("sglang", SGL + "models/deepseek_v2.py", 2166, 2166,
     'is_neox_style = not getattr(config, "rope_interleave", True)'),
    ("sglang", SGL + "models/mllama4.py", 606, 637, "def permute_qk_weight_for_rotary"),
    ("sglang", SGL + "models/llama.py", 225, 232, "self.rotary_emb = get_rope("),
    ("sglang", SGL + "configs/model_config.py", 2623, 2623,
     "def compute_mla_mscale_scaling"),
    ("sglang", SGL_LAYERS + "base.py", 115, 120, "cache = cache.to(dtype)"),
    ("sglang", SGL_LAYERS + "base.py", 115, 120, "SGLANG_ROPE_CACHE_FP32"),
    ("sglang", SGL_LAYERS + "factory.py", 319, 332, '"attn_factor",'),
    ("sglang", SGL_LAYERS + "rope_variant.py", 880, 892,
     "max_len = self.max_position_embeddings * self.scaling_factor"),
    ("sglang", SGL_LAYERS + "rope_variant.py", 141, 154,
     "torch.any(positions > k)"),
    ("sglang", SGL + "models/gemma3_causal.py", 297, 302, "apply_rotary_pos_emb("),
    ("sglang", SGL + "models/gemma3_causal.py", 414, 440,
     "self.rope_init_fn = ROPE_INIT_FUNCTIONS[self.rope_type]"),
    ("sglang", SGL + "models/gemma3_causal.py", 575, 603,
     "Gemma3RotaryEmbedding(config=local_config)"),
    ("sglang", SGL + "models/gemma3_causal.py", 186, 224,
     "self.rotary_emb = get_rope("),
    ("sglang", SGL + "models/gemma3_causal.py", 269, 269,
     "q, k = self.rotary_emb(positions, q, k)"),
    # llama.cpp at 0c1e57098 (vendor/llama.cpp of llama-cpp-python 0.3.36)
    ("llama.cpp", "src/llama-model.cpp", 3023, 3205,
     "llama_rope_type llama_model_rope_type("),
    ("llama.cpp", "conversion/llama.py", 176, 181, "def permute(weights"),
    ("llama.cpp", "ggml/src/ggml.c", 4486, 4487, "floorf(ggml_rope_yarn_corr_dim("),
    ("llama.cpp", "ggml/src/ggml.c", 4486, 4487, "ceilf(ggml_rope_yarn_corr_dim("),
    ("llama.cpp", "src/models/grok.cpp", 26, 26, "LLM_KV_ROPE_SCALING_YARN_BETA_FAST"),
    ("llama.cpp", "src/models/grok.cpp", 25, 25, "LLM_KV_ROPE_SCALING_YARN_ATTN_FACTOR"),
    ("llama.cpp", "src/models/mistral3.cpp", 7, 7, "LLM_KV_ROPE_SCALING_YARN_BETA_FAST"),
    ("llama.cpp", "src/llama-hparams.h", 161, 162, "yarn_beta_fast   = 32.0f;"),
    ("llama.cpp", "src/llama-hparams.h", 161, 162, "yarn_beta_slow   =  1.0f;"),
    ("llama.cpp", "src/llama-model.cpp", 2337, 2350, "return layers[il].rope_long;"),
    ("llama.cpp", "src/llama-kv-cache.cpp", 1934, 1984,
     "ggml_tensor * llama_kv_cache::build_rope_shift("),
    ("llama.cpp", "src/llama-kv-cache.cpp", 1188, 1197,
     "if (hparams.n_pos_per_embd() > 1) {"),
    ("llama.cpp", "src/llama-kv-cache.cpp", 218, 234, "const bool has_v = !is_mla;"),
    ("llama.cpp", "src/llama-context.cpp", 206, 210, "pull/17945"),
    ("llama.cpp", "src/llama-context.cpp", 176, 214,
     "cparams.yarn_attn_factor = get_mscale(factor, 1.0f);"),
    ("llama.cpp", "src/llama-context.cpp", 185, 198, "mscale = mscale_all_dims;"),
    ("llama.cpp", "src/llama-context.cpp", 290, 290, "GGML_PAD(cparams.n_ctx, 256)"),
    ("llama.cpp", "src/llama-kv-cache-iswa.cpp", 70, 80,
     "GGML_PAD(std::min(size_base, hparams.n_swa*(unified ? n_seq_max : 1) + n_ubatch)"),
    ("llama.cpp", "src/llama-kv-cache-iswa.cpp", 70, 80, "size_swa = size_base;"),
    ("llama.cpp", "conversion/deepseek.py", 326, 326,
     'self.hparams["num_key_value_heads"] = 1'),
    ("llama.cpp", "conversion/deepseek.py", 349, 353,
     'add_key_length(kv_lora_rank + hparams["qk_rope_head_dim"])'),
    ("llama.cpp", "conversion/deepseek.py", 382, 386,
     "add_rope_scaling_yarn_log_mul(0.1 * rope_mscale_all)"),
    ("llama.cpp", "src/models/deepseek2.cpp", 34, 38, "hparams.rope_yarn_log_mul /= 0.1f;"),
    ("llama.cpp", "src/models/deepseek2.cpp", 307, 314,
     "1.0f * mscale * mscale / sqrtf(float(n_embd_head_k_mla))"),
]

#: where each table's paths are rooted in its archive
PAIR_ROOTS = {"vllm": "", "sglang": SGL}
#: the llama.cpp tree inside the source distribution
LLAMA_CPP_ROOT = "llama_cpp_python-0.3.36/vendor/llama.cpp/"


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


class Archive:
    """Text files of a wheel (zip) or a source distribution (tar.gz)."""

    def __init__(self, path: Path, root: str = ""):
        self.path, self.root, self._cache = Path(path), root, {}
        if self.path.suffix == ".whl":
            self._zip = zipfile.ZipFile(self.path)
            self._tar = None
        else:
            self._zip, self._tar = None, tarfile.open(self.path)  # noqa: SIM115

    def text(self, path: str) -> str | None:
        name = self.root + path
        if name not in self._cache:
            try:
                if self._zip is not None:
                    data = self._zip.read(name)
                else:
                    member = self._tar.extractfile(name)
                    data = member.read() if member else None
            except KeyError:
                data = None
            self._cache[name] = None if data is None else data.decode()
        return self._cache[name]


#: the position of ``is_neox_style`` among ``get_rope``'s positional
#: parameters (vLLM: layers/rotary_embedding/__init__.py line 35; SGLang:
#: layers/rotary_embedding/factory.py line 130)
NEOX_POSITION = {"vllm": 2, "sglang": 4}


def neox_argument(source: str, line: int, engine: str) -> str | None:
    """The ``is_neox_style`` that the ``get_rope(...)`` call spanning ``line``
    passes: ``"default"`` when it passes none, the literal when it passes one,
    the default of ``getattr(config, KEY, DEFAULT)`` as ``"DEFAULT unless the
    config sets KEY"``, otherwise the argument's source text; ``None`` when no
    such call spans the line."""
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call):
            continue
        name = getattr(node.func, "id", getattr(node.func, "attr", None))
        if name != "get_rope" or not node.lineno <= line <= node.end_lineno:
            continue
        value = next((kw.value for kw in node.keywords if kw.arg == "is_neox_style"),
                     None)
        if value is None and len(node.args) > NEOX_POSITION[engine]:
            value = node.args[NEOX_POSITION[engine]]
        if value is None:
            return "default"
        if (isinstance(value, ast.Call) and getattr(value.func, "id", None) == "getattr"
                and len(value.args) == 3 and isinstance(value.args[1], ast.Constant)):
            return f"{ast.unparse(value.args[2])} unless the config sets " \
                   f"{value.args[1].value}"
        return ast.unparse(value)
    return None


def check_pairs(engine: str, table: dict, archive: Archive) -> list[dict]:
    rows = []
    for model_type, (value, path, line, code) in table.items():
        row = {"engine": engine, "model_type": model_type, "value": repr(value),
               "path": path, "line": line, "code": code}
        if line is None:
            row.update(passed=True, checked="no line cited (no model)")
            rows.append(row)
            continue
        source = archive.text(PAIR_ROOTS[engine] + path)
        if source is None:
            row.update(passed=False, checked=f"{path} is not in the archive")
            rows.append(row)
            continue
        text = source.splitlines()[line - 1].strip()
        want = code.split("  #")[0].strip()
        argument = neox_argument(source, line, engine)
        agrees = True
        if argument is not None and value in (True, False):
            said = argument.split(" unless ")[0]
            agrees = said == str(value) or (said == "default" and value is True)
        elif value in (True, False):  # a line that sets a flag: its last literal
            literal = re.search(r"(True|False)\)?,?$", text)
            agrees = literal is None or literal.group(1) == str(value)
            argument = None if literal is None else f"the line sets {literal.group(1)}"
        row.update(line_text=text, neox_in_source=argument,
                   passed=text.startswith(want) and agrees,
                   checked="line text" + (", get_rope argument" if argument else ""))
        rows.append(row)
    return rows


def check_citations(archives: dict[str, Archive]) -> list[dict]:
    rows = []
    for engine, path, first, last, needle in CITATIONS:
        source = archives[engine].text(path)
        span = "" if source is None else "\n".join(source.splitlines()[first - 1:last])
        rows.append({"engine": engine, "path": path, "first": first, "last": last,
                     "needle": needle, "passed": needle in span})
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--vllm-wheel", type=Path, required=True)
    parser.add_argument("--sglang-wheel", type=Path, required=True)
    parser.add_argument("--llama-cpp-sdist", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    from posenc_lib.tools.engines import SGLANG_PAIRS, VLLM_PAIRS

    archives = {"vllm": Archive(args.vllm_wheel), "sglang": Archive(args.sglang_wheel),
                "llama.cpp": Archive(args.llama_cpp_sdist, LLAMA_CPP_ROOT)}
    pairs = (check_pairs("vllm", VLLM_PAIRS, archives["vllm"])
             + check_pairs("sglang", SGLANG_PAIRS, archives["sglang"]))
    citations = check_citations(archives)
    result = {
        "command": "scripts/engines/check_citations.py (see its docstring)",
        "archives": {
            "vllm": {"file": args.vllm_wheel.name, "sha256": sha256(args.vllm_wheel)},
            "sglang": {"file": args.sglang_wheel.name,
                       "sha256": sha256(args.sglang_wheel)},
            "llama.cpp": {"file": args.llama_cpp_sdist.name,
                          "sha256": sha256(args.llama_cpp_sdist),
                          "root": LLAMA_CPP_ROOT},
        },
        "pairs": pairs,
        "citations": citations,
    }
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    failed = [r for r in pairs + citations if not r["passed"]]
    for r in failed:
        print("FAILED:", r, file=sys.stderr)
    print(f"{len(pairs)} pair entries, {len(citations)} citations, {len(failed)} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
