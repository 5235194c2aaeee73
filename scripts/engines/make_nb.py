"""Writes book/recipes/engines.ipynb (run once; the notebook is the source)."""
import nbformat

cells = []


def md(cid, text):
    cells.append(nbformat.v4.new_markdown_cell(text, id=cid))


def code(cid, text, tags=None):
    c = nbformat.v4.new_code_cell(text, id=cid)
    if tags:
        c.metadata["tags"] = tags
    cells.append(c)


md("eng-intro", """(recipe-engines)=
# What your engine does with this config

**Task.** You read a model's `config.json` with transformers and serve it with
vLLM or llama.cpp. Each engine turns the same rope block into rotations with its
own code, and the engines do not always agree. This page puts them side by side
for every rope type and for every model of the book's table of models.

**Where the answers come from.**

- transformers 4.57.6 is installed here and runs in the cells below.
- vLLM needs a CUDA build of torch, so it is not run. The cells run
  **transcriptions** of its rotary-embedding modules, in
  `posenc_lib.engines`. Each function names the file, commit and lines
  it copies.
- llama.cpp is also run from **transcriptions**, of ggml-org/llama.cpp at
  commit `0c1e57098`, the commit that `llama-cpp-python` 0.3.36 vendors.
  `make engines` (see the README) builds that version on the CPU and compares
  its logits with transformers.

Every number below is computed by a cell and checked against transformers, or
against a transcription labelled as such.""")

code("eng-setup", """import json
import math
from collections import defaultdict
from importlib import resources

import torch

from posenc_lib import engines, rope, scaling

U = 2.0**-24  # float32 unit roundoff
models = json.loads(
    resources.files("posenc_lib").joinpath("data/models.json").read_text()
)["models"]
rows = {
    m["name"]: {e: engines.engine_summary(m["config"], e) for e in engines.ENGINES}
    for m in models
}""")

md("eng-table-md", """## The table of models, by family

One row per `model_type`, with the pair layout in each engine. The factor
column is the factor on cos and sin, the same in all three engines for every
model in the table. A model whose cache llama.cpp cannot shift is marked
"no shift".""")

code("eng-table", """families = defaultdict(list)
for m in models:
    families[m["config"]["model_type"]].append(m["name"])
print(f"{'model_type':13} {'rope':9} {'transformers':12} {'llama.cpp':40} factor")
for mt, names in families.items():
    r = rows[names[0]]
    tf, cpp = r["transformers"], r["llama.cpp"]
    factor = "-" if tf["factor"] is None else f"{tf['factor']:.4f}"
    shift = "" if cpp["can_shift"] else "  no shift"
    print(
        f"{mt:13} {tf['rope_type'] or '-':9} {tf['pairs']:12} {cpp['pairs'][:40]:40} "
        f"{factor}{shift}"
    )
    for name in names:  # every model of the family agrees with its engines
        for e, row in rows[name].items():
            if tf["factor"] is not None:
                assert math.isclose(row["factor"], rows[name]["transformers"]["factor"])
assert {mt for mt in families if not rows[families[mt][0]]["llama.cpp"]["can_shift"]} == {
    "qwen2_5_vl",
    "qwen3_vl",
}""")

md("eng-pairs-md", """## Pair layout

transformers rotates feature $i$ with feature $i + d/2$ (halves) for almost
every model. llama.cpp chooses the layout per architecture. Llama, Mistral,
SmolLM3, ERNIE 4.5 and DeepSeek use NORM, which pairs neighbours $(2i, 2i+1)$.
Qwen, Phi-3, Gemma, GPT-NeoX, gpt-oss and LFM2 use NEOX, which pairs halves
(`llama_model_rope_type`, src/llama-model.cpp lines 3023-3205). For Llama,
Mistral and SmolLM3, llama.cpp's converter permutes the rows of `q_proj` and
`k_proj` so that NORM on the GGUF weights gives the same scores as halves on
the original weights (`LlamaModel.permute`, conversion/llama.py lines 176-181).

**Consequence.** A GGUF whose q/k rows were not permuted, for example one
written by another tool, still runs. Its scores are silently wrong. The cell
below shows both cases: the permuted weights agree with transformers within
float32 rounding, and the unpermuted ones do not.""")

code("eng-pairs", """g = torch.Generator().manual_seed(0)
dim, hidden, n, base = 64, 96, 32, 10000.0
x = torch.randn(n, hidden, generator=g)
wq, wk = torch.randn(dim, hidden, generator=g), torch.randn(dim, hidden, generator=g)
positions = torch.arange(n) * 97
inv = rope.inv_freq(dim, base, dtype=torch.float32)
s_tf = rope.apply_rope(x @ wq.T, positions, inv) @ rope.apply_rope(x @ wk.T, positions, inv).T


def cpp_scores(wq, wk):
    q = engines.llama_cpp_rope((x @ wq.T)[:, None], positions, n_dims=dim, freq_base=base)
    k = engines.llama_cpp_rope((x @ wk.T)[:, None], positions, n_dims=dim, freq_base=base)
    return q[:, 0] @ k[:, 0].T


permuted = cpp_scores(engines.convert_permute(wq, 1), engines.convert_permute(wk, 1))
unpermuted = cpp_scores(wq, wk)
scale = (x @ wq.T).norm(dim=1)[:, None] * (x @ wk.T).norm(dim=1)[None, :]
# bound: angle error of ggml's float32 frequencies (p*theta*(i+8)u <= p*(d/2+8)u)
# at both ends, plus 8u per term and the d-term sums
bound = scale * (2 * positions.max() * (dim // 2 + 8) * U + (8 + 4 * dim) * U)
err_ok = ((permuted - s_tf).abs() / bound).max().item()
err_bad = ((unpermuted - s_tf).abs() / scale).max().item()
print(f"permuted: largest |difference| / bound = {err_ok:.1e}")
print(f"not permuted: largest |difference| / (|q| |k|) = {err_bad:.3f}")
assert err_ok <= 1 and err_bad > 0.1""")

md("eng-freq-md", """## Frequencies and the factor, rope type by rope type

The next cell prints what each engine does for each rope type, with the source
of each entry. The cell after it computes the frequencies that each engine's
code gives for a 128-feature head and compares them with transformers' own
`ROPE_INIT_FUNCTIONS`.""")

code("eng-facts", """for rope_type, per_engine in engines.FACTS.items():
    print(rope_type)
    for e, f in per_engine.items():
        print(f"  {e:12} frequencies: {f['frequencies']}")
        print(f"  {'':12} factor: {f['factor']}; changes: {f['when']}")
        print(f"  {'':12} source: {f['source']}")""", tags=["hide-output"])

code("eng-freq", """from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

dim, base, orig, factor = 128, 10000.0, 4096, 8.0
long_len = int(orig * factor)


def tf(rope_type, seq_len=None, **scaling_kw):
    config = LlamaConfig(
        head_dim=dim,
        hidden_size=dim,
        num_attention_heads=1,
        rope_theta=base,
        max_position_embeddings=orig if rope_type == "dynamic" else long_len,
        rope_scaling=dict(rope_type=rope_type, **scaling_kw) if scaling_kw else None,
    )
    return ROPE_INIT_FUNCTIONS[rope_type](config, "cpu", seq_len=seq_len)


def rel(a, b):
    return ((a.double() - b.double()).abs() / b.double()).max().item()


yarn_kw = dict(factor=factor, original_max_position_embeddings=orig)
l3_kw = dict(
    factor=factor, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=orig,
)
tf_yarn, tf_yarn_att = tf("yarn", **yarn_kw)
v_yarn, v_ms, _ = engines.vllm_yarn(dim, orig, base, factor)
tf_dyn, _ = tf("dynamic", seq_len=long_len, factor=factor)
v_dyn_base, _ = engines.vllm_dynamic_ntk_base(dim, orig, base, factor)
# linear: vLLM divides positions, transformers frequencies; the angles (at most
# long_len / factor radians) differ by <= 8 roundings of the angle, cos and sin
# then by that plus 2u each side
lin_v = engines.vllm_linear_cache(dim, orig, base, factor).double()
ang = torch.arange(long_len)[:, None].double() * tf("linear", factor=factor)[0].double()
lin_tf = torch.cat((ang.cos(), ang.sin()), dim=-1)
lin_diff = (lin_v - lin_tf).abs().max().item() / (8 * U * ang.max().item() + 4 * U)
results = {
    "default: vLLM": rel(engines.vllm_inv_freq(dim, base), tf("default")[0]),
    "linear: vLLM cos/sin, |diff| / bound": lin_diff,
    "yarn: vLLM": rel(v_yarn, tf_yarn),
    "llama3: vLLM": rel(
        engines.vllm_llama3_inv_freq(dim, base, factor, 1.0, 4.0, orig),
        tf("llama3", **l3_kw)[0],
    ),
    "dynamic at 8x: vLLM vs transformers": rel(engines.vllm_inv_freq(dim, v_dyn_base), tf_dyn),
}
for k, v in results.items():
    print(f"{k:40} {v:.2e}")
assert results["default: vLLM"] == 0 and results["yarn: vLLM"] == 0
assert results["llama3: vLLM"] <= 4 * U
assert 0 < results["linear: vLLM cos/sin, |diff| / bound"] <= 1
assert results["dynamic at 8x: vLLM vs transformers"] > 0.5
assert v_ms == tf_yarn_att""")

md("eng-freq-after-0", """The printed numbers are the largest relative difference of the
frequencies, except for linear scaling (difference over its derived bound).""")

md("eng-freq-after", """vLLM's default, YaRN and Llama 3 frequencies are transformers' own,
bit for bit or within a few float32 roundings. For linear scaling vLLM divides
the positions rather than the frequencies: its cos and sin differ from
transformers' only by float32 rounding of the angle, within the bound the cell
derives. Dynamic NTK is the exception, treated in the next
section.""")

md("eng-factor-md", """## The attention factor on the logits

YaRN and LongRoPE multiply cos and sin by a factor. transformers calls it
`attention_scaling`, vLLM `mscale`, and llama.cpp combines `attn_factor` with
`rope_yarn`'s own $1 + 0.1\\ln s$. The factor reaches both $q$ and $k$, so
every logit is multiplied by its **square**. All three engines do this, and
the first check below confirms it on vLLM's cos/sin cache.

The engines differ when a config sets `attention_factor` explicitly. A config
with `factor: 64` and `attention_factor: 1.0` asks for no scaling:

- transformers uses the value as given;
- so does vLLM at the transcribed commit (`yarn_scaling_rope.py` lines 40-50);
- llama.cpp's converter writes the value to the GGUF key
  `rope.scaling.yarn_attn_factor`, which only Grok reads
  (src/models/grok.cpp line 25). `llama_context` then sets `attn_factor`
  from the factor alone (src/llama-context.cpp lines 176-214).

**Consequence.** llama.cpp runs such a model with the logits scaled by
$(1 + 0.1 \\ln 64)^2$. Its attention is then sharper than the one the model was
trained with.""")

code("eng-factor", """_, att_tf = scaling.rope_parameters(
    "yarn", 64, base, factor=64.0, original_max_position_embeddings=4096,
    attention_factor=1.0,
)
att_vllm = engines.vllm_yarn(64, 4096, base, 64.0, attention_factor=1.0)[1]
att_cpp = engines.llama_cpp_net_factor(64.0)
print(f"factor on cos and sin: transformers {att_tf}, vLLM {att_vllm}, "
      f"llama.cpp {att_cpp:.4f}; llama.cpp's logits x {att_cpp**2:.4f}")
assert att_tf == att_vllm == 1.0 and math.isclose(att_cpp, 1 + 0.1 * math.log(64))

# the square on the logits, through vLLM's forward_native and its cached cos/sin
g = torch.Generator().manual_seed(1)
q, k = torch.randn(8, dim, generator=g), torch.randn(8, dim, generator=g)
pos = torch.randint(0, long_len, (8,), generator=g)
plain = engines._cache(v_yarn, long_len)
scaled = engines._cache(v_yarn, long_len, v_ms)
q1, k1 = engines.vllm_forward_native(pos, q, k, plain, head_size=dim, rotary_dim=dim)
q2, k2 = engines.vllm_forward_native(pos, q, k, scaled, head_size=dim, rotary_dim=dim)
ratio = ((q2 @ k2.T) / (q1 @ k1.T)).median().item()
print(f"median logit ratio {ratio:.6f}; mscale {v_ms:.6f}, mscale^2 {v_ms**2:.6f}")
assert abs(ratio - v_ms**2) < 1e-4 * v_ms**2""")

md("eng-when-md", """## When the frequencies change during generation

**Dynamic NTK.** transformers recomputes the base at every forward pass from
the current length (`dynamic_rope_update`). Beyond `max_position_embeddings`
the base grows with the length, and the slowest pair never turns further than
it did in training. vLLM builds one cos/sin cache of
`max_position_embeddings * factor` rows, once. At the transcribed commit its
base bracket is `max_len / max_position_embeddings - (factor - 1)`, which
equals 1, so vLLM uses the configured base at every length: plain RoPE,
extrapolated `factor` times beyond the trained range.

**LongRoPE.** transformers switches from the short to the long factors once a
sequence passes `original_max_position_embeddings`. vLLM decides once, at
start-up: if `max_model_len` exceeds the original context, every request reads
the long factors, short prompts included. llama.cpp decides when the context
is created, from its size (`llama_model::get_rope_factors`,
src/llama-model.cpp lines 2337-2350).

**Consequence.** Phi-3-mini-128k served with its full context by vLLM or
llama.cpp applies the long factors to a 1,000-token prompt. transformers
applies the short ones to the same prompt. The two engines therefore give
different outputs for the same short prompt.""")

code("eng-when", """# dynamic NTK: how far the slowest pair turns at 8x the trained length,
# relative to the farthest it turned in training
trained = orig * tf("default")[0][-1].item()
ratio_tf = long_len * tf_dyn[-1].item() / trained
ratio_vllm = long_len * engines.vllm_inv_freq(dim, v_dyn_base)[-1].item() / trained
print(f"slowest pair, angle at {long_len:,} / trained maximum: transformers "
      f"{ratio_tf:.3f}, vLLM {ratio_vllm:.3f}")
# transformers: factor / (factor^2 - factor + 1) <= 1; vLLM: factor
assert math.isclose(ratio_tf, factor / (factor**2 - factor + 1), rel_tol=1e-5)
assert math.isclose(ratio_vllm, factor, rel_tol=1e-6)

phi = next(m for m in models if m["config"]["model_type"] == "phi3")["config"]
rs = phi["rope_scaling"]
o, mpe = phi["original_max_position_embeddings"], phi["max_position_embeddings"]
head = phi["hidden_size"] // phi["num_attention_heads"]
v = engines.vllm_longrope(head, mpe, o, phi["rope_theta"], rs["short_factor"],
                          rs["long_factor"], max_model_len=mpe)
short_tf, _ = scaling.rope_from_config(phi, seq_len=1000, dtype=torch.float32)
print(f"Phi-3 at 1,000 tokens: vLLM uses long factors: {v['use_long_rope']}; "
      f"largest frequency ratio to transformers {(short_tf / v['inv_freq']).max():.2f}")
assert v["use_long_rope"] and (short_tf / v["inv_freq"]).max() > 2""")

md("eng-shift-md", """## What the cache holds, and whether it may be shifted

All three engines cache keys *after* rotation. llama.cpp's context shift
removes old tokens and moves the rest to earlier positions: it rotates the
cached keys again, by the shift (`llama_kv_cache::build_rope_shift`,
src/llama-kv-cache.cpp lines 1934-1985). That works only with one position per
token. `get_can_shift` returns false when `n_pos_per_embd() > 1`, which is the
case for M-RoPE and interleaved M-RoPE (lines 1188-1197), and the shift then
aborts. The table above marks Qwen2.5-VL and Qwen3-VL accordingly. MLA caches
(DeepSeek-V3) may be shifted.

From the code, not from a run: the shift calls the same `ggml_rope_ext` with
the context's `attn_factor`. Under YaRN a shifted key is therefore multiplied
by the factor a second time. The cell below shows this with the transcribed
kernel: rotating a key by $p$ and then shifting it by $\\delta$ gives the key
rotated by $p + \\delta$, times the factor.""")

code("eng-shift", """s = 8.0
af = engines.llama_cpp_yarn_attn_factor(s)
kw = dict(n_dims=dim, mode="neox", freq_base=base, freq_scale=1 / s, ext_factor=1.0,
          attn_factor=af, n_ctx_orig=orig)
key = torch.randn(4, 1, dim, generator=g)
p, delta = torch.tensor([5000, 9000, 20000, 30000]), torch.full((4,), -3000)
shifted = engines.llama_cpp_rope(engines.llama_cpp_rope(key, p, **kw), delta, **kw)
direct = engines.llama_cpp_rope(key, p + delta, **kw)
ratio = (shifted.norm(dim=-1) / direct.norm(dim=-1)).flatten()
print(f"|shifted| / |rotated at p + delta| = {ratio.tolist()}; net factor "
      f"{engines.llama_cpp_net_factor(s):.6f}")
assert torch.allclose(ratio, torch.full_like(ratio, engines.llama_cpp_net_factor(s)),
                      rtol=1e-5)
assert not engines.llama_cpp_can_shift("qwen2_5_vl")""")

md("eng-bugs", """## Known engine bugs this page's checks catch

- **vLLM's dynamic NTK is static, with the wrong base.** This was reported in
  vllm-project/vllm issues #3488 and #5093 (2024). The formula then gave the
  constant bracket $\\alpha^2 - \\alpha + 1$ (issue #41236, fixed by PR
  #41277). The bracket transcribed here equals 1 (PR #41301), and PR #52675
  guards the case of a served length below the trained one. The check
  `test_vllm_dynamic_ntk_is_the_configured_base_at_every_length` in
  `tests/test_engines.py`, and the dynamic row of the frequency cell above,
  compare the static base with transformers' and would have caught all three.
- **An explicit YaRN `attention_factor` is dropped.** vLLM PRs #46280 and
  #48351 (the key was not forwarded), PR #48623 (`mscale`/`mscale_all_dim`
  ignored), SGLang PR #33558 (the factor applied twice). The cell
  `eng-factor` and `test_llama_cpp_ignores_an_explicit_yarn_attention_factor`
  check the factor each engine applies against the config's.
- **llama.cpp's YaRN factor applied twice.** ggml-org/llama.cpp PR #17945
  divides the kernel's $1 + 0.1 \\ln s$ out of `attn_factor`. The check
  `test_llama_cpp_yarn_matches_transformers` compares the net factor, and the
  rotated vectors, with transformers.""")

nb = nbformat.v4.new_notebook(cells=cells)
nb.metadata = {
    "kernelspec": {"display_name": "Python 3", "language": "python", "name": "python3"},
    "language_info": {"name": "python"},
}
nbformat.write(nb, "book/recipes/engines.ipynb")
