"""posenc_lib.tools.engines against the engines and transformers 4.57.6 (its
ROPE_INIT_FUNCTIONS and apply_rotary_pos_emb): vLLM 0.33.0's own
rotary-embedding code and SGLang 0.5.23's (both vendored, sha256-checked
against the release, run), the llama.cpp transcriptions, and every table
model through each
engine's code path. Each test names where an engine differs and how much.

Tolerances: u = 2**-24 is float32's unit roundoff. Where two float32 paths
compute the same cos/sin by different kernels, each value is within 2 ulp of
the exact one (torch's vectorised sin/cos are 1-ulp kernels; 2 allows the
scalar tail), so the two differ by at most 4u per coefficient and a rotated
component x0*c - x1*s by at most (|x0| + |x1|)*4u plus the 2u of its own
product and sum rounding per term.
"""

import base64
import hashlib
import math
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

from posenc_lib import _vendor, rope, scaling
from posenc_lib.tools import engines

U = 2.0 ** -24
SETTINGS = settings(max_examples=10, deadline=None, derandomize=True)

dims = st.sampled_from([16, 32, 64, 128])
bases = st.sampled_from([10000.0, 500000.0, 1000000.0])
factors = st.sampled_from([2.0, 4.0, 8.0, 16.0, 32.0])
origs = st.sampled_from([2048, 4096, 8192, 32768])


def _tf_cos_sin(inv_freq, positions, factor=1.0):
    """transformers' LlamaRotaryEmbedding.forward: float32 matmul, then
    cos/sin times attention_scaling."""
    freqs = (inv_freq[None, :, None].float() @ positions[None, None, :].float()).transpose(1, 2)
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * factor, emb.sin() * factor


def _tol(x, n_dims, extra=0.0):
    """Per-component bound for two float32 rotations of x that agree up to
    their cos/sin kernels (module docstring); extra adds an angle error."""
    half = n_dims // 2
    a, b = x[..., :half].abs(), x[..., half:n_dims].abs()
    pair = (a + b) * (6 * U + extra)
    return torch.cat((pair, pair), dim=-1)


# ---- vLLM 0.33.0, run from the vendored files --------------------------------

VENDOR = Path(_vendor.__file__).parent / "vllm"


def _rotary():
    return _vendor.vllm_rotary()


def test_vendored_vllm_files_are_the_release_files():
    """Every vendored file has the sha256 that the vllm 0.33.0 wheel's own
    RECORD lists for it (RECORD's lines are stored with the files), no file is
    missing or extra, and vendor.txt names that wheel."""
    record = {}
    for line in (VENDOR / "RECORD").read_text().splitlines():
        path, digest, size = line.rsplit(",", 2)
        record[path] = (digest.removeprefix("sha256="), int(size))
    on_disk = {str(p.relative_to(VENDOR)) for p in VENDOR.rglob("*.py")}
    assert on_disk == set(record)
    for path, (digest, size) in record.items():
        data = (VENDOR / path).read_bytes()
        ours = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert ours == digest and len(data) == size, path
    text = (VENDOR / "vendor.txt").read_text()
    assert "vllm==0.33.0" in text and "4b6bdec4ab269990bf70d45a3c1e94c3" in text
    assert "Apache License" in (VENDOR / "LICENSE").read_text()


def test_the_loader_leaves_no_vllm_module_behind():
    _rotary()
    assert not [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]


def _tf_rotate(q, k, positions, inv_freq, factor=1.0):
    cos, sin = _tf_cos_sin(inv_freq, positions, factor)
    n, hd = q.shape[0], inv_freq.numel() * 2
    tq, tk = apply_rotary_pos_emb(q.view(n, -1, hd).transpose(0, 1)[None],
                                  k.view(n, -1, hd).transpose(0, 1)[None], cos, sin)
    return (tq[0].transpose(0, 1).reshape(q.shape), tk[0].transpose(0, 1).reshape(k.shape))


@SETTINGS
@given(dim=dims, base=bases, seed=st.integers(0, 2**16))
def test_vllm_default_rotation_matches_transformers(dim, base, seed):
    """vLLM's own RotaryEmbedding (its cache and forward_native, neox style)
    rotates q and k as transformers' Llama does; its inv_freq is transformers'
    bit for bit."""
    g = torch.Generator().manual_seed(seed)
    heads, n = 3, 40
    positions = torch.randint(0, 4096, (n,), generator=g)
    q = torch.randn(n, heads * dim, generator=g)
    k = torch.randn(n, heads * dim, generator=g)
    config = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                         rope_theta=base)
    tf_inv, _ = ROPE_INIT_FUNCTIONS["default"](config, "cpu")
    emb = _rotary().get_rope(dim, 4096, True, {"rope_theta": base, "rope_type": "default"},
                             torch.float32)
    assert torch.equal(emb._compute_inv_freq(base), tf_inv)
    vq, vk = emb.forward_native(positions, q.clone(), k.clone())
    tq, tk = _tf_rotate(q, k, positions, tf_inv)
    for v, t, x in ((vq, tq, q), (vk, tk, k)):
        tol = _tol(x.view(n, heads, dim), dim).reshape(n, heads * dim)
        assert ((v - t).abs() <= tol).all()


def _yarn_params(factor, orig, beta, truncate):
    return {"rope_theta": 0.0, "rope_type": "yarn", "factor": factor,
            "original_max_position_embeddings": orig, "beta_fast": beta[0],
            "beta_slow": beta[1], "truncate": truncate}


@SETTINGS
@given(dim=dims, base=bases, factor=factors, orig=origs,
       beta=st.sampled_from([(32, 1), (16, 2), (1, 1)]), truncate=st.booleans())
def test_vllm_yarn_frequencies_and_factor_match_transformers(dim, base, factor, orig, beta,
                                                            truncate):
    """vLLM's YaRNScalingRotaryEmbedding, built by its get_rope, has
    transformers' inv_freq bit for bit (truncate true and false: vLLM reads
    it) and transformers' attention factor in its cached cos and sin."""
    params = {"factor": factor, "original_max_position_embeddings": orig,
              "beta_fast": beta[0], "beta_slow": beta[1], "truncate": truncate}
    inv, factor_tf = scaling.rope_parameters("yarn", dim, base, reference="transformers",
                                             dtype=torch.float32, **params)
    rp = {**_yarn_params(factor, orig, beta, truncate), "rope_theta": base}
    config = {"model_type": "qwen2", "head_dim": dim, "hidden_size": 4 * dim,
              "num_attention_heads": 4, "rope_theta": base,
              "max_position_embeddings": orig * int(factor),
              "rope_scaling": {k: v for k, v in rp.items() if k != "rope_theta"}}
    run = engines.vllm_rope(config)
    assert run["class"] == "YaRNScalingRotaryEmbedding"
    assert torch.equal(run["inv_freq"], inv)
    assert run["factor"] == pytest.approx(factor_tf, rel=U)


def test_vllm_gpt_oss_truncate_false_is_read_and_changes_9_of_32_pairs():
    """gpt-oss (d 64, base 150,000, s 32, L 4,096, truncate false): vLLM's
    model file passes truncate, so vLLM's frequencies are transformers'; with
    truncate true (what llama.cpp always does) 9 of 32 differ, by up to
    1.76x."""
    config = _models()["gpt-oss-20b"]
    assert config["rope_scaling"]["truncate"] is False
    run = engines.vllm_rope(config)
    tf = engines.engine_rope(config, "transformers")["inv_freq"]
    assert torch.equal(run["inv_freq"], tf)
    args = engines.vllm_get_rope_args(config)
    assert args["rope_parameters"]["truncate"] is False
    flipped = {**config, "rope_scaling": {**config["rope_scaling"], "truncate": True}}
    other = engines.vllm_rope(flipped)["inv_freq"]
    diff = engines.frequency_difference(other, tf)
    assert diff["pairs_differ"] == 9
    assert diff["max_ratio"] == pytest.approx(1.76, abs=0.01)


def test_vllm_yarn_factor_on_cos_sin_is_its_square_on_the_logits():
    """vLLM's mscale multiplies cos and sin of both q and k, so every q.k is
    mscale**2 times the unscaled one: transformers' attention_scaling, not
    mscale once."""
    g = torch.Generator().manual_seed(0)
    dim, orig, factor, n = 64, 4096, 8.0, 16
    r = _rotary()
    scaled = r.get_rope(dim, orig * 8, True, {**_yarn_params(factor, orig, (32, 1), True),
                                               "rope_theta": 10000.0}, torch.float32)
    plain = r.get_rope(dim, orig * 8, True,
                       {**_yarn_params(factor, orig, (32, 1), True), "rope_theta": 10000.0,
                        "attention_factor": 1.0}, torch.float32)
    ms = scaled.mscale
    positions = torch.randint(0, orig * 8, (n,), generator=g)
    q, k = torch.randn(n, dim, generator=g), torch.randn(n, dim, generator=g)
    q1, k1 = plain.forward_native(positions, q.clone(), k.clone())
    q2, k2 = scaled.forward_native(positions, q.clone(), k.clone())
    s1, s2 = q1 @ k1.T, q2 @ k2.T
    bound = (4 + 2 * dim) * U * (q1.abs() @ k1.abs().T) * ms ** 2
    assert ((s2 - ms ** 2 * s1).abs() <= bound).all()
    assert ((s2 - ms * s1).abs() > bound).any()


@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_vllm_dynamic_ntk_is_the_configured_base_at_every_length(factor):
    """vLLM 0.33.0's get_rope gives DynamicNTKScalingRotaryEmbedding
    max_trained_positions = max_position unless the config sets it, so its
    one static cache uses the configured base; transformers scales the base
    beyond max_position_embeddings: equal up to the trained length, different
    beyond."""
    dim, base, mpe = 128, 10000.0, 4096
    config = {"model_type": "llama", "head_dim": dim, "hidden_size": 4 * dim,
              "num_attention_heads": 4, "rope_theta": base, "max_position_embeddings": mpe,
              "rope_scaling": {"rope_type": "dynamic", "factor": factor}}
    run = engines.vllm_rope(config)
    assert run["class"] == "DynamicNTKScalingRotaryEmbedding"
    short, _ = scaling.rope_parameters("dynamic", dim, base, seq_len=mpe, factor=factor,
                                       max_position_embeddings=mpe,
                                       reference="transformers", dtype=torch.float32)
    long, _ = scaling.rope_parameters("dynamic", dim, base, seq_len=int(mpe * factor),
                                      factor=factor, max_position_embeddings=mpe,
                                      reference="transformers", dtype=torch.float32)
    assert torch.equal(run["inv_freq"], short)
    assert (long[1:] < run["inv_freq"][1:]).all()


@SETTINGS
@given(dim=dims, base=bases, factor=factors, orig=origs,
       bands=st.sampled_from([(1.0, 4.0), (1.0, 2.0), (2.0, 8.0)]))
def test_vllm_llama3_matches_transformers(dim, base, factor, orig, bands):
    inv, att = scaling.rope_parameters("llama3", dim, base, factor=factor,
                                       low_freq_factor=bands[0], high_freq_factor=bands[1],
                                       original_max_position_embeddings=orig,
                                       reference="transformers", dtype=torch.float32)
    emb = _rotary().get_rope(dim, orig * 4, True,
                             {"rope_theta": base, "rope_type": "llama3", "factor": factor,
                              "low_freq_factor": bands[0], "high_freq_factor": bands[1],
                              "original_max_position_embeddings": orig}, torch.float32)
    # same formula, evaluated as (1-s)*f/factor + s*f in both: <= 4u apart
    assert torch.allclose(emb._compute_inv_freq(base), inv, rtol=4 * U, atol=0)
    assert att == 1.0


def test_vllm_longrope_is_fixed_by_max_model_len():
    """vLLM's Phi-3 LongRoPE reads max_model_len once: with vLLM's default
    (max_position_embeddings) every request gets the long factors, which
    transformers uses only past the original context; with max_model_len <=
    original every request gets the short ones."""
    config = _models()["phi-3-mini-128k-instruct"]
    orig = config["rope_scaling"].get("original_max_position_embeddings") or config[
        "original_max_position_embeddings"]
    tf_short = engines.engine_rope(config, "transformers")["inv_freq"]
    tf_long = scaling.rope_from_config(config, seq_len=orig + 1, reference="transformers",
                                       dtype=torch.float32)[0]
    default = engines.vllm_rope(config)
    assert default["use_long_rope"]
    assert torch.allclose(default["inv_freq"], tf_long, rtol=4 * U, atol=0)
    assert not torch.allclose(default["inv_freq"], tf_short, rtol=1e-3)
    fits = engines.vllm_rope(config, max_model_len=orig)
    assert not fits["use_long_rope"]
    assert torch.allclose(fits["inv_freq"], tf_short, rtol=4 * U, atol=0)
    assert engines.vllm_rope(config, max_model_len=orig + 1)["use_long_rope"]


def test_vllm_rope_short_cache_equals_the_full_cache():
    """vllm_rope builds the caches over the positions it needs; the rows it
    returns are the full cache's rows (Llama 2, a YaRN, a linear scaling;
    the full cache built by vLLM unchanged)."""
    linear = {"model_type": "llama", "head_dim": 64, "hidden_size": 256,
              "num_attention_heads": 4, "rope_theta": 10000.0,
              "max_position_embeddings": 8192,
              "rope_scaling": {"rope_type": "linear", "factor": 4.0}}
    for config in (_models()["llama-2-7b"], _models()["qwen2.5-7b-instruct-yarn"], linear):
        full = engines.vllm_rope(config, full_cache=True)
        few = engines.vllm_rope(config, positions=[5, 3000, 4095])
        assert torch.equal(few["rows"], full["rows"][[0, 1, 5, 3000, 4095]])
        assert torch.allclose(few["inv_freq"], full["inv_freq"], rtol=8 * U, atol=1e-7)
        assert few["factor"] == full["factor"]


#: Where an engine's frequencies or factors differ from transformers' for a
#: table model, as this module predicts it (anything else must agree).
PREDICTED = {
    # vLLM's default max_model_len = max_position_embeddings > 4,096: long
    # factors for every request; transformers: short ones up to 4,096 tokens
    ("phi-3-mini-128k-instruct", "vllm"): "frequencies",
    ("phi-3-mini-128k-instruct", "llama.cpp"): "frequencies",  # n_ctx default: long
    # ggml always floors/ceils the correction range: truncate=false is lost
    ("gpt-oss-20b", "llama.cpp"): "frequencies",
    # llama.cpp reads yarn_beta_fast/slow only for Grok and Mistral 3
    ("kimi-k2-instruct", "llama.cpp"): "frequencies",
}


def _models():
    import json
    from importlib import resources

    models = json.loads(resources.files("posenc_lib").joinpath("data/models.json")
                        .read_text())["models"]
    return {m["name"]: m["config"] for m in models}


def test_every_engine_against_transformers_on_every_table_model():
    """For every table model and engine, the frequencies, the factor on cos
    and sin and the softmax-scale factor computed through the engine's own
    code path (vLLM's and SGLang's vendored code, llama.cpp's
    converter/loader/ggml transcription) agree with transformers 4.57.6
    (run) except where PREDICTED says they differ, and there they differ."""
    seen = set()
    for name, config in _models().items():
        tf = engines.engine_rope(config, "transformers")
        for engine in ("vllm", "llama.cpp", "sglang"):
            ours = engines.engine_rope(config, engine)
            if tf is None:
                assert ours is None
                continue
            if ours is None:  # vLLM: no model of its own and no backend (none here)
                continue
            diff = engines.frequency_difference(ours["inv_freq"], tf["inv_freq"])
            differs = diff["pairs_differ"] > 0
            if PREDICTED.get((name, engine)) == "frequencies":
                assert differs, (name, engine)
                seen.add((name, engine))
            else:
                assert not differs, (name, engine, diff)
                assert ours["factor"] == pytest.approx(tf["factor"], rel=4 * U), (name, engine)
            assert ours["logit_scale"] == pytest.approx(tf["logit_scale"], rel=1e-6), (
                name, engine)
    assert seen == set(PREDICTED)


def test_vllm_deepseek_builds_deepseek_scaling_with_the_softmax_mscale_squared():
    """vLLM's DeepSeek model file rewrites yarn to deepseek_yarn: get_rope
    builds DeepseekScalingRotaryEmbedding (mscale ratio 1 on cos and sin) and
    the attention multiplies its softmax scale by mscale(40, 1)**2, the
    1.874 that transformers' DeepseekV3Attention applies."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_get_mscale

    for name in ("deepseek-v3", "kimi-k2-instruct", "deepseek-v3.2"):
        config = _models()[name]
        run = engines.vllm_rope(config)
        assert run["class"] == "DeepseekScalingRotaryEmbedding"
        assert not run["module"].is_neox_style
        f = config["rope_scaling"]["factor"]
        assert run["logit_scale"] == pytest.approx(yarn_get_mscale(f, 1.0) ** 2, rel=1e-12)
        assert run["factor"] == 1.0


# ---- llama.cpp -----------------------------------------------------------

def test_convert_permute_is_the_inverse_of_interleaved_to_half():
    """llama.cpp's converter takes Llama's half layout to neighbours: the
    inverse of posenc_lib.rope.interleaved_to_half, exactly."""
    g = torch.Generator().manual_seed(2)
    for n_head, n_kv, hd in ((4, 4, 16), (8, 2, 32)):
        w = torch.randn(n_kv * hd, 24, generator=g)
        assert torch.equal(rope.interleaved_to_half(engines.convert_permute(w, n_head, n_kv),
                                                    n_kv), w)


def _cpp_angle_error(n_dims, positions, base):
    """Bound on llama.cpp's angle minus transformers' float32 angle: ggml
    forms base^(-2i/d) by i float32 products (i+2 roundings, one of powf),
    transformers by one pow and one division (3 roundings), and each angle
    adds one; so |dtheta_i| <= p*theta_i*(i+8)*u."""
    i = torch.arange(n_dims // 2, dtype=torch.float64)
    theta = base ** (-2 * i / n_dims)
    return positions.double()[:, None, None] * (theta * (i + 8) * U)


@SETTINGS
@given(dim=dims, base=bases, seed=st.integers(0, 2**16))
def test_llama_cpp_norm_on_permuted_weights_scores_as_transformers_halves(dim, base, seed):
    """A Llama converted by llama.cpp (q/k permuted, NORM rotation) gives the
    q.k of transformers (halves on the original weights), up to the angle
    error of ggml's repeated-product frequencies."""
    g = torch.Generator().manual_seed(seed)
    n, hidden = 24, 48
    x = torch.randn(n, hidden, generator=g)
    wq, wk = torch.randn(dim, hidden, generator=g), torch.randn(dim, hidden, generator=g)
    positions = torch.randint(0, 8192, (n,), generator=g)
    inv = rope.inv_freq(dim, base, dtype=torch.float32)
    q_tf = rope.apply_rope(x @ wq.T, positions, inv)
    k_tf = rope.apply_rope(x @ wk.T, positions, inv)
    q_cpp = engines.llama_cpp_rope((x @ engines.convert_permute(wq, 1).T)[:, None], positions,
                                   n_dims=dim, mode="norm", freq_base=base)[:, 0]
    k_cpp = engines.llama_cpp_rope((x @ engines.convert_permute(wk, 1).T)[:, None], positions,
                                   n_dims=dim, mode="norm", freq_base=base)[:, 0]
    s_tf, s_cpp = q_tf @ k_tf.T, q_cpp @ k_cpp.T
    # each pair's angle differs by <= dtheta at each end: |ds| <= sum_i |q_i||k_i|
    # (dtheta_q + dtheta_k + 8u) plus the sums' 2*dim*u
    err = _cpp_angle_error(dim, positions, base)[:, 0, :]
    qa, ka = (x @ wq.T).abs(), (x @ wk.T).abs()
    qp = torch.sqrt(qa[:, : dim // 2] ** 2 + qa[:, dim // 2:] ** 2).double()
    kp = torch.sqrt(ka[:, : dim // 2] ** 2 + ka[:, dim // 2:] ** 2).double()
    bound = ((qp * (err + 8 * U)) @ kp.T + qp @ (kp * (err + 8 * U)).T
             + 4 * dim * U * (qp @ kp.T))
    assert ((s_cpp - s_tf).abs().double() <= bound).all()


@SETTINGS
@given(dim=dims, base=bases, factor=factors, orig=origs, seed=st.integers(0, 2**16))
def test_llama_cpp_yarn_matches_transformers(dim, base, factor, orig, seed):
    """ggml's rope_yarn with llama.cpp's attn_factor (NEOX mode) rotates as
    transformers' YaRN: the same correction range, the same ramp, and a net
    factor 0.1 ln(factor) + 1 on cos and sin."""
    g = torch.Generator().manual_seed(seed)
    n = 20
    x = torch.randn(n, 2, dim, generator=g)
    positions = torch.randint(0, orig * int(factor), (n,), generator=g)
    inv, att = scaling.rope_parameters("yarn", dim, base, factor=factor,
                                       original_max_position_embeddings=orig,
                                       reference="float64", dtype=torch.float64)
    assert engines.llama_cpp_net_factor(factor) == pytest.approx(att, rel=1e-12)
    out = engines.llama_cpp_rope(x, positions, n_dims=dim, mode="neox", freq_base=base,
                                 freq_scale=1 / factor, ext_factor=1.0,
                                 attn_factor=engines.llama_cpp_yarn_attn_factor(factor),
                                 n_ctx_orig=orig)
    ref = rope.apply_rope(x.double().transpose(0, 1), positions, inv,
                          attention_factor=att).transpose(0, 1)
    # float64 reference: ggml's angle error (its bound, on the scaled theta,
    # which is <= the unscaled one) plus float32 trig and 2 ulp of the factor
    err = _cpp_angle_error(dim, positions, base).expand(n, 2, dim // 2)
    half = dim // 2
    a, b = x[..., :half].abs().double(), x[..., half:].abs().double()
    pair = (a + b) * (err + 8 * U) * att
    tol = torch.cat((pair, pair), dim=-1)
    assert ((out.double() - ref).abs() <= tol).all()


def test_an_explicit_yarn_attention_factor_per_engine():
    """transformers and vLLM use a config's attention_factor as given;
    llama.cpp's converter writes it to rope.scaling.yarn_attn_factor, which the
    context overwrites (net factor 0.1 ln(factor) + 1); SGLang's get_rope does
    not forward it (0.1 ln(factor) + 1 again)."""
    config = {"model_type": "qwen2", "head_dim": 64, "hidden_size": 256,
              "num_attention_heads": 4, "rope_theta": 10000.0,
              "max_position_embeddings": 4096 * 64,
              "rope_scaling": {"rope_type": "yarn", "factor": 64.0,
                               "original_max_position_embeddings": 4096,
                               "attention_factor": 1.0}}
    default = 0.1 * math.log(64) + 1
    assert engines.engine_rope(config, "transformers")["factor"] == 1.0
    assert engines.engine_rope(config, "vllm")["factor"] == 1.0
    assert engines.engine_rope(config, "llama.cpp")["factor"] == pytest.approx(default)
    assert engines.engine_rope(config, "sglang")["factor"] == pytest.approx(default, rel=U)
    assert any("attention_factor" in n for n in engines.engine_rope(config, "llama.cpp")[
        "notes"])


def test_llama_cpp_llama3_freq_factors_match_transformers():
    """llama.cpp divides each angle by the converter's rope_freqs factor;
    transformers multiplies inv_freq by the band formula; equal within the
    angle error bound."""
    dim, base = 64, 500000.0
    params = {"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                  "original_max_position_embeddings": 8192}
    inv, _ = scaling.rope_parameters("llama3", dim, base, dtype=torch.float64, **params)
    # the converter's loop (conversion/llama.py lines 304-324 at 0c1e57098)
    freqs = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=torch.float32) / dim))
    ff = []
    for f in freqs.tolist():
        wavelen = 2 * math.pi / f
        if wavelen < 8192 / 4.0:
            ff.append(1.0)
        elif wavelen > 8192 / 1.0:
            ff.append(8.0)
        else:
            smooth = (8192 / wavelen - 1.0) / (4.0 - 1.0)
            ff.append(1 / ((1 - smooth) / 8.0 + smooth))
    positions = torch.tensor([1, 1000, 100000])
    x = torch.cat((torch.ones(3, 1, dim // 2), torch.zeros(3, 1, dim // 2)), dim=-1)
    out = engines.llama_cpp_rope(x, positions, n_dims=dim, mode="neox", freq_base=base,
                                 freq_factors=torch.tensor(ff))[:, 0]
    angle_cpp = torch.atan2(out[:, dim // 2:], out[:, : dim // 2]).double()
    angle_tf = torch.remainder(positions.double()[:, None] * inv + math.pi, 2 * math.pi) - math.pi
    err = _cpp_angle_error(dim, positions, base)[:, 0, :] + 8 * U
    diff = torch.remainder(angle_cpp - angle_tf + math.pi, 2 * math.pi) - math.pi
    assert (diff.abs() <= err).all()


def test_every_table_model_has_a_llama_cpp_layout_and_shift_answer():
    from posenc_lib.tools import inspector

    names = inspector.model_names() if hasattr(inspector, "model_names") else None
    import json
    from importlib import resources

    models = json.loads(resources.files("posenc_lib").joinpath("data/models.json")
                        .read_text())["models"]
    assert names is None or len(names) == len(models)
    for m in models:
        mt = m["config"]["model_type"]
        assert engines.llama_cpp_pairs(mt) in ("norm", "neox", "mrope", "imrope", "none")
    assert not engines.llama_cpp_can_shift("qwen2_5_vl")
    assert engines.llama_cpp_can_shift("deepseek_v3")
    with pytest.raises(ValueError, match="model_type"):
        engines.llama_cpp_pairs("no-such-model")
    with pytest.raises(ValueError, match="engine"):
        engines.engine_summary(models[0]["config"], "tensorrt-llm")


def test_engine_summary_for_every_table_model():
    """Every model of the table gets an answer from each engine, with the
    factor computed by that engine's path (checked against transformers in
    test_every_engine_against_transformers_on_every_table_model); llama.cpp
    refuses to shift M-RoPE caches only; the frequency line names the pairs
    that differ from transformers'."""
    for name, config in _models().items():
        rows = {e: engines.engine_summary(config, e) for e in engines.ENGINES}
        tf = rows["transformers"]
        for e, row in rows.items():
            assert row["rope_type"] == tf["rope_type"], (name, e)
            if tf["factor"] is None:
                assert row["factor"] is None
            elif row["frequencies"] is not None:
                assert (row["frequencies"]["pairs_differ"] > 0) == (
                    (name, e) in PREDICTED), (name, e)
        assert rows["llama.cpp"]["can_shift"] == (tf["rope_type"] != "mrope"), name
        assert rows["vllm"]["can_shift"] is None


def test_gpt_oss_under_llama_cpp_is_transformers_with_truncate_true():
    """llama.cpp's gpt-oss frequencies (ggml floors and ceils the YaRN
    correction range) are transformers' own with truncate=true, within ggml's
    rounding, and differ from the checkpoint's truncate=false in 9 of 32
    pairs, by up to 1.76x."""
    config = _models()["gpt-oss-20b"]
    cpp = engines.llama_cpp_inv_freq(config)
    tf_false = scaling.rope_from_config(config, reference="transformers",
                                        dtype=torch.float32)[0]
    as_true = {**config, "rope_scaling": {**config["rope_scaling"], "truncate": True}}
    tf_true = scaling.rope_from_config(as_true, reference="transformers",
                                       dtype=torch.float32)[0]
    assert engines.frequency_difference(cpp, tf_true)["pairs_differ"] == 0
    diff = engines.frequency_difference(cpp, tf_false)
    assert diff["pairs_differ"] == 9 and diff["max_ratio"] == pytest.approx(1.7627, abs=1e-3)
    summary = engines.engine_summary(config, "llama.cpp")
    assert summary["frequencies"]["pairs_differ"] == 9
    assert any("truncate" in n for n in summary["notes"])
    # the angles at position 131,071, in float64 from the float32 frequencies
    angle = 131071 * (cpp.double() - tf_false.double()).abs().max().item()
    assert angle == pytest.approx(28.9, abs=0.1)


def test_kimi_k2_betas_are_not_read_by_llama_cpp():
    """Kimi K2 sets beta_fast = beta_slow = 1; llama.cpp's DEEPSEEK2 loader
    does not read the GGUF's yarn_beta_* keys, so ggml ramps with 32 and 1:
    transformers' own frequencies for betas 32 and 1."""
    config = _models()["kimi-k2-instruct"]
    cpp = engines.llama_cpp_inv_freq(config)
    as_default = {**config, "rope_scaling": {**config["rope_scaling"], "beta_fast": 32,
                                             "beta_slow": 1}}
    tf_default = scaling.rope_from_config(as_default, reference="transformers",
                                          dtype=torch.float32)[0]
    assert engines.frequency_difference(cpp, tf_default)["pairs_differ"] == 0
    assert engines.engine_summary(config, "llama.cpp")["frequencies"]["pairs_differ"] > 0


def _deepseek(mscale, mscale_all_dim, factor=40.0):
    return {"model_type": "deepseek_v3", "qk_rope_head_dim": 64, "hidden_size": 2048,
            "num_attention_heads": 16, "rope_theta": 10000.0,
            "max_position_embeddings": int(4096 * factor),
            "rope_scaling": {"type": "yarn", "factor": factor, "beta_fast": 32,
                             "beta_slow": 1, "mscale": mscale,
                             "mscale_all_dim": mscale_all_dim,
                             "original_max_position_embeddings": 4096}}


def test_deepseek_yarn_in_a_gguf():
    """DeepSeek-V2-Lite-style YaRN (mscale = mscale_all_dim = 0.707): the
    converter writes 0.1 * mscale_all_dim as rope.scaling.yarn_log_mul; the
    DEEPSEEK2 loader divides it by 0.1 again; the context takes
    mscale = mscale_all_dim; the factor on cos and sin is transformers' mscale
    ratio (1) and kq_scale carries transformers' softmax mscale**2. With
    mscale != mscale_all_dim llama.cpp's assumption breaks: its factor differs
    from transformers' and vLLM's."""
    lite = _deepseek(0.707, 0.707)
    p = engines.llama_cpp_params(lite)
    assert p["arch"] == "LLM_ARCH_DEEPSEEK2"
    assert p["gguf_yarn_log_mul"] == pytest.approx(0.0707)
    assert p["rope_yarn_log_mul"] == pytest.approx(0.707)
    tf = engines.engine_rope(lite, "transformers")
    for engine in ("llama.cpp", "vllm"):
        ours = engines.engine_rope(lite, engine)
        assert ours["factor"] == pytest.approx(tf["factor"], rel=1e-6), engine
        assert ours["logit_scale"] == pytest.approx(tf["logit_scale"], rel=1e-6), engine
    assert tf["logit_scale"] == pytest.approx((0.1 * 0.707 * math.log(40) + 1) ** 2)
    mixed = _deepseek(1.0, 0.707)
    tf = engines.engine_rope(mixed, "transformers")
    assert tf["factor"] != pytest.approx(1.0, rel=1e-3)
    assert engines.engine_rope(mixed, "vllm")["factor"] == pytest.approx(tf["factor"],
                                                                         rel=1e-6)
    assert engines.engine_rope(mixed, "llama.cpp")["factor"] == pytest.approx(1.0, rel=1e-6)
    # Kimi K2 converts to DEEPSEEK2 as well
    assert engines.llama_cpp_params(_models()["kimi-k2-instruct"])["arch"] == (
        "LLM_ARCH_DEEPSEEK2")


# ---- vLLM and SGLang: pair layout per model ------------------------------------

def _table():
    import json
    from importlib import resources

    return json.loads(resources.files("posenc_lib").joinpath("data/models.json")
                      .read_text())["models"]


def test_every_engine_pairs_the_checkpoint_rows_as_transformers_does():
    """For every model of the table, the features of the checkpoint's q/k rows
    that each engine rotates together are transformers' pairs: vLLM's and
    SGLang's is_neox_style per model file (with Llama 4's permutation at load),
    llama.cpp's NORM/NEOX (with the converter's permutation). The tables are
    read from three code bases, independently of transformers' modelling code
    (TRANSFORMERS_NEIGHBOURS, and the inspector's INTERLEAVED_PAIRS)."""
    from posenc_lib.tools import inspector

    checked = 0
    for m in _table():
        c = m["config"]
        tf = engines.transformers_pairs(c)
        if c["model_type"] not in ("bloom", "t5"):  # the inspector's own record
            assert (inspector._pair_layout(c) == "interleaved") == (tf == "neighbours")
        v, s = engines.vllm_pairs(c), engines.sglang_pairs(c)
        cpp = engines.llama_cpp_pairs(c["model_type"])
        if cpp == "none":
            assert v["checkpoint_pairs"] == "no RoPE" or v["is_neox_style"] is None
            continue
        cpp_on_checkpoint = ("neighbours" if cpp == "norm"
                             and c["model_type"] not in engines.PERMUTED else "halves")
        assert v["checkpoint_pairs"] == tf, (m["name"], v)
        assert s["checkpoint_pairs"] == tf, (m["name"], s)
        assert cpp_on_checkpoint == tf, m["name"]
        checked += 1
    assert checked == 29
    # what the engines run, before any permutation of the rows
    assert [engines.vllm_pairs({"model_type": t})["is_neox_style"]
            for t in ("llama4", "ernie4_5", "deepseek_v3", "olmo3", "t5")] == [
        True, False, False, "transformers", None]


def test_deepseek_rope_interleave_false_is_read_by_sglang_not_vllm():
    """transformers' DeepSeek-V3 pairs neighbours only while rope_interleave is
    true; SGLang reads the key (deepseek_v2.py line 2166), vLLM passes
    is_neox_style=False whatever it says (line 1126): with rope_interleave false
    vLLM pairs other features than transformers and SGLang (the request of
    vllm-project/vllm PR #40267, closed unmerged)."""
    ds = next(m["config"] for m in _table() if m["name"] == "deepseek-v3")
    flat = {**ds, "rope_interleave": False}
    assert engines.transformers_pairs(ds) == "neighbours"
    assert engines.transformers_pairs(flat) == "halves"
    assert engines.sglang_pairs(flat)["checkpoint_pairs"] == "halves"
    assert engines.vllm_pairs(flat)["checkpoint_pairs"] == "neighbours"
    from transformers import DeepseekV3Config

    assert DeepseekV3Config().rope_interleave is True  # the default read above


def test_vllm_llama4_permutation_makes_neox_rotate_the_checkpoints_neighbours():
    """vLLM's (and SGLang's) load-time permutation of Llama 4's q/k rows, then
    NEOX rotation, gives exactly the rows of neighbour (GPT-J) rotation of the
    unpermuted projection, permuted the same way: the same products, so the
    same bits."""
    g = torch.Generator().manual_seed(3)
    heads, dim, hidden, n = 4, 32, 40, 12
    w = torch.randn(heads * dim, hidden, generator=g)
    x = torch.randn(n, hidden, generator=g)
    positions = torch.randint(0, 4096, (n,), generator=g)
    r = _rotary()
    params = {"rope_theta": 500000.0, "rope_type": "default"}
    neox_emb = r.get_rope(dim, 4096, True, params, torch.float32)
    gptj_emb = r.get_rope(dim, 4096, False, params, torch.float32)
    wp = engines.vllm_permute_qk_for_rotary(w, heads)
    neox, _ = neox_emb.forward_native(positions, x @ wp.T, x @ wp.T)
    gptj, _ = gptj_emb.forward_native(positions, x @ w.T, x @ w.T)
    # permuting the rotated neighbour layout's features as the rows were permuted
    eye = torch.eye(heads * dim)
    perm = engines.vllm_permute_qk_for_rotary(eye, heads).argmax(dim=1)
    assert torch.equal(neox, gptj[:, perm])
    # without the permutation NEOX pairs other features: the scores change
    plain, _ = neox_emb.forward_native(positions, x @ w.T, x @ w.T)
    assert not torch.allclose(plain @ plain.T, gptj @ gptj.T, rtol=1e-3)


# ---- SGLang 0.5.23, run from the vendored files ------------------------------

SGL_VENDOR = Path(_vendor.__file__).parent / "sglang"


def test_vendored_sglang_files_are_the_release_files():
    """Every vendored SGLang file has the sha256 that the sglang 0.5.23
    wheel's own RECORD lists for it, no file is missing or extra, and
    vendor.txt names that wheel."""
    record = {}
    for line in (SGL_VENDOR / "RECORD").read_text().splitlines():
        path, digest, size = line.rsplit(",", 2)
        record[path] = (digest.removeprefix("sha256="), int(size))
    on_disk = {str(p.relative_to(SGL_VENDOR)) for p in SGL_VENDOR.rglob("*.py")}
    assert on_disk == set(record) and len(record) == 9
    for path, (digest, size) in record.items():
        data = (SGL_VENDOR / path).read_bytes()
        ours = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        assert ours == digest and len(data) == size, path
    text = (SGL_VENDOR / "vendor.txt").read_text()
    assert "sglang==0.5.23" in text and engines.SGLANG["wheel_sha256"] in text
    assert "Apache License" in (SGL_VENDOR / "LICENSE").read_text()


def test_the_sglang_loader_leaves_no_sglang_module_behind():
    for platform in _vendor.SGLANG_PLATFORMS:
        rotary = _vendor.sglang_rotary(platform)
        assert rotary.factory.__file__.startswith(str(SGL_VENDOR))
        assert not [m for m in sys.modules if m == "sglang" or m.startswith("sglang.")]
    with pytest.raises(ValueError, match="platform"):
        _vendor.sglang_rotary("tpu")


def _llama(dim, base, mpe=4096, rope_scaling=None):
    return {"model_type": "llama", "head_dim": dim, "hidden_size": dim * 4,
            "num_attention_heads": 4, "rope_theta": base, "max_position_embeddings": mpe,
            "rope_scaling": rope_scaling}


@SETTINGS
@given(dim=dims, base=bases, seed=st.integers(0, 2**16))
def test_sglang_default_rotation_matches_transformers(dim, base, seed):
    """SGLang's get_rope for a Llama config builds RotaryEmbedding, whose
    frequencies are transformers' (ROPE_INIT_FUNCTIONS, run) bit for bit and
    whose forward (forward_native) rotates q and k as transformers' Llama
    does, offsets added to the positions."""
    g = torch.Generator().manual_seed(seed)
    heads, n = 2, 30
    positions = torch.randint(0, 2000, (n,), generator=g)
    offsets = torch.randint(0, 2000, (n,), generator=g)
    q = torch.randn(n, heads * dim, generator=g)
    k = torch.randn(n, heads * dim, generator=g)
    config = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                         rope_theta=base)
    tf_inv, _ = ROPE_INIT_FUNCTIONS["default"](config, "cpu")
    run = engines.sglang_rope(_llama(dim, base), full_cache=True)
    assert run["class"] == "RotaryEmbedding" and run["factor"] == 1.0
    assert torch.equal(run["rows"][1, : dim // 2], torch.cos(tf_inv))
    sq, sk = run["module"](positions, q, k, offsets=offsets)
    cos, sin = _tf_cos_sin(tf_inv, positions + offsets)
    tq, tk = apply_rotary_pos_emb(q.view(n, heads, dim).transpose(0, 1)[None],
                                  k.view(n, heads, dim).transpose(0, 1)[None], cos, sin)
    for s_, t, x in ((sq, tq, q), (sk, tk, k)):
        t = t[0].transpose(0, 1).reshape(n, heads * dim)
        tol = _tol(x.view(n, heads, dim), dim).reshape(n, heads * dim)
        assert ((s_ - t).abs() <= tol).all()


def test_sglang_cache_is_float32_on_cuda_and_the_model_dtype_on_cpu():
    """base.py lines 115-120: the cache is built in float32 and kept so on
    CUDA (HIP, XPU); elsewhere it is cast to get_rope's dtype (the model's):
    bfloat16 coefficients within bfloat16's unit roundoff 2**-8 of the
    float32 ones, not all equal."""
    args = engines.sglang_get_rope_args(_llama(64, 10000.0))
    c32 = engines.sglang_rope(args=args, full_cache=True)["rows"]
    cpu = engines.sglang_rope(args=args, full_cache=True, dtype=torch.bfloat16)["rows"]
    cuda = engines.sglang_rope(args=args, full_cache=True, dtype=torch.bfloat16,
                               platform="cuda")["rows"]
    assert c32.dtype == torch.float32 and cpu.dtype == torch.bfloat16
    assert torch.equal(cuda, c32)
    err = (cpu.float() - c32).abs()
    assert (err <= 2.0 ** -8 * c32.abs()).all() and err.max() > 0


@SETTINGS
@given(dim=dims, base=bases, factor=factors, orig=origs,
       beta=st.sampled_from([(32, 1), (16, 2)]), truncate=st.booleans())
def test_sglang_yarn_frequencies_and_factor_match_transformers(dim, base, factor, orig,
                                                               beta, truncate):
    """SGLang's YaRN (a qwen2 config through get_rope) has transformers'
    frequencies (ROPE_INIT_FUNCTIONS["yarn"], run) bit for bit, truncate
    (gpt-oss sets it false) included, transformers' factor (no
    attention_factor set), and a cache of original * factor rows."""
    rs = {"rope_type": "yarn", "factor": factor, "original_max_position_embeddings": orig,
          "beta_fast": beta[0], "beta_slow": beta[1], "truncate": truncate}
    config = {**_llama(dim, base, int(orig * factor), rs), "model_type": "qwen2"}
    tf = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                     rope_theta=base, max_position_embeddings=int(orig * factor),
                     rope_scaling=rs)
    inv, att = ROPE_INIT_FUNCTIONS["yarn"](tf, "cpu")
    run = engines.sglang_rope(config, positions=[orig * factor - 1])
    assert run["class"] == "YaRNScalingRotaryEmbedding"
    assert torch.equal(run["inv_freq"], inv)
    assert run["factor"] == pytest.approx(att, rel=U)  # cos(0) * mscale, one rounding
    assert run["rows"].shape[0] == 3  # the last position, orig * factor - 1, is cached
    assert run["module"].cos_sin_cache.shape[0] == 3


def test_sglang_yarn_mscale_ratio_matches_transformers():
    """mscale / mscale_all_dim given: SGLang's factor is transformers'
    ratio, not 0.1 ln s + 1."""
    rs = {"rope_type": "yarn", "factor": 40.0, "original_max_position_embeddings": 4096,
          "mscale": 0.707, "mscale_all_dim": 1.0}
    tf = LlamaConfig(head_dim=64, hidden_size=256, num_attention_heads=4,
                     max_position_embeddings=163840, rope_scaling=rs)
    _, att = ROPE_INIT_FUNCTIONS["yarn"](tf, "cpu")
    ms = engines.sglang_rope({**_llama(64, 10000.0, 163840, rs),
                              "model_type": "qwen2"})["module"].mscale
    assert ms == pytest.approx(att, rel=1e-15) and ms != pytest.approx(1 + 0.1 * math.log(40))


@SETTINGS
@given(dim=dims, base=bases, factor=factors, orig=origs,
       bands=st.sampled_from([(1.0, 4.0), (1.0, 2.0), (2.0, 8.0)]))
def test_sglang_llama3_matches_transformers(dim, base, factor, orig, bands):
    rs = {"rope_type": "llama3", "factor": factor, "low_freq_factor": bands[0],
          "high_freq_factor": bands[1], "original_max_position_embeddings": orig}
    tf = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                     rope_theta=base, rope_scaling=rs)
    inv, att = ROPE_INIT_FUNCTIONS["llama3"](tf, "cpu")
    run = engines.sglang_rope(_llama(dim, base, orig * 4, rs))
    assert run["class"] == "Llama3RotaryEmbedding"
    assert torch.allclose(run["inv_freq"], inv, rtol=4 * U, atol=0) and att == 1.0


def _yarn_args(factor, **keys):
    return {"head_size": 64, "rotary_dim": 64, "max_position": 4096 * int(factor),
            "base": 10000.0, "is_neox_style": True,
            "rope_scaling": {"rope_type": "yarn", "factor": factor,
                             "original_max_position_embeddings": 4096, **keys}}


def test_sglang_drops_an_explicit_attention_factor_and_the_laguna_fix_restores_it():
    """transformers uses a config's attention_factor as the factor; SGLang's
    get_rope does not forward the key (factory.py lines 319-332), so it applies
    0.1 ln s + 1. Copying the value into SGLang's attn_factor multiplies the two
    (sgl-project/sglang PR #33558: factor 128, 1.4852 -> 2.2058); the PR's
    conversion attention_factor / (0.1 ln s + 1) gives transformers' factor."""
    tf = LlamaConfig(head_dim=64, hidden_size=256, num_attention_heads=4,
                     max_position_embeddings=4096 * 64,
                     rope_scaling={"rope_type": "yarn", "factor": 64.0,
                                   "original_max_position_embeddings": 4096,
                                   "attention_factor": 1.0})
    _, att_tf = ROPE_INIT_FUNCTIONS["yarn"](tf, "cpu")
    assert att_tf == 1.0

    def mscale(factor, **keys):
        return engines.sglang_rope(args=_yarn_args(factor, **keys))["module"].mscale

    dropped = mscale(64.0, attention_factor=1.0)
    assert dropped == pytest.approx(1 + 0.1 * math.log(64), rel=1e-15)
    assert mscale(64.0, attention_factor=0.5) == dropped  # whatever the value
    final = 1 + 0.1 * math.log(128)
    twice = mscale(128.0, attn_factor=final)
    assert round(final, 4) == 1.4852 and round(twice, 4) == 2.2058
    fixed = mscale(64.0, attn_factor=1.0 / dropped)
    assert fixed == pytest.approx(att_tf, rel=4 * 2.0 ** -53)


@pytest.mark.parametrize("factor", [2.0, 4.0, 8.0])
def test_sglang_dynamic_ntk_is_the_longest_lengths_base_at_every_length(factor):
    """SGLang's DynamicNTKScalingRotaryEmbedding (rope_variant.py lines
    880-892) builds one static cache of max_position_embeddings * factor rows
    with transformers' dynamic-NTK base at that full length, for every
    request: transformers' frequencies (run) at that length, and smaller ones
    than transformers' (the plain base) within the trained length."""
    dim, base, mpe = 128, 10000.0, 4096
    rs = {"rope_type": "dynamic", "factor": factor}
    run = engines.sglang_rope(_llama(dim, base, mpe, rs), positions=[int(mpe * factor) - 1])
    assert run["class"] == "DynamicNTKScalingRotaryEmbedding" and run["rows"].shape[0] == 3
    tf = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                     rope_theta=base, max_position_embeddings=mpe, rope_scaling=rs)
    long, _ = ROPE_INIT_FUNCTIONS["dynamic"](tf, "cpu", seq_len=int(mpe * factor))
    short, _ = ROPE_INIT_FUNCTIONS["dynamic"](tf, "cpu", seq_len=mpe)
    # both: one float32 pow of a float64 base, one division; <= 4u apart
    assert torch.allclose(run["inv_freq"], long, rtol=4 * U, atol=0)
    assert (run["inv_freq"][1:] < short[1:]).all()


def test_sglang_linear_cache_matches_transformers():
    """SGLang divides the positions by the factor, transformers the
    frequencies: the angles differ by float32 rounding only (each side is two
    roundings of t inv / factor, so <= 4u theta apart), cos and sin by that
    plus 2 ulp of each kernel (2u each side). The cache has mpe * factor rows."""
    dim, base, mpe, factor = 64, 10000.0, 512, 4.0
    run = engines.sglang_rope(_llama(dim, base, mpe, {"rope_type": "linear",
                                                      "factor": factor}), full_cache=True)
    cache = run["rows"].double()
    tf = LlamaConfig(head_dim=dim, hidden_size=dim * 4, num_attention_heads=4,
                     rope_theta=base, rope_scaling={"rope_type": "linear", "factor": factor})
    inv, _ = ROPE_INIT_FUNCTIONS["linear"](tf, "cpu")
    t = torch.arange(int(mpe * factor), dtype=torch.float32)
    ang = t[:, None] * inv[None, :]
    ref = torch.cat((ang.cos(), ang.sin()), dim=-1).double()
    theta = torch.cat((ang, ang), dim=-1).double()
    assert run["class"] == "LinearScalingRotaryEmbedding" and cache.shape == ref.shape
    assert ((cache - ref).abs() <= theta * 4 * U + 4 * U).all()


def test_sglang_rope_short_cache_equals_the_full_cache():
    """sglang_rope builds the caches over the positions it needs; the rows it
    returns are the full cache's rows (default, YaRN, linear, LongRoPE)."""
    linear = _llama(64, 10000.0, 2048, {"rope_type": "linear", "factor": 4.0})
    yarn = {**_llama(64, 10000.0, 8192, {"rope_type": "yarn", "factor": 4.0,
                                         "original_max_position_embeddings": 2048}),
            "model_type": "qwen2"}
    for config in (_llama(64, 10000.0), yarn, linear):
        full = engines.sglang_rope(config, full_cache=True)
        few = engines.sglang_rope(config, positions=[5, 3000, 4095])
        assert torch.equal(few["rows"], full["rows"][[0, 1, 5, 3000, 4095]])
        assert torch.allclose(few["inv_freq"], full["inv_freq"], rtol=8 * U, atol=1e-7)
        assert few["factor"] == full["factor"]
    full, few = _sglang_phi3(), engines.sglang_rope(_phi3(), positions=[5, 4095, 9000])
    o = full["short_rows"]
    assert torch.equal(few["rows"], full["rows"][[0, 1, 5, 4095, o, o + 1, o + 5,
                                                  o + 4095, o + 9000]])


def _phi3():
    return next(m["config"] for m in _table() if m["config"]["model_type"] == "phi3")


_PHI3 = {}


def _sglang_phi3():
    if "run" not in _PHI3:
        _PHI3["run"] = engines.sglang_rope(_phi3(), full_cache=True)
    return _PHI3["run"]


def _sglang_phi3_rows(positions):
    """What SGLang's Phi3LongRoPEScaledRotaryEmbedding.forward rotates a
    batch at ``positions`` with: q = (1, 0) in every pair comes out as
    (cos, sin) exactly."""
    module = _sglang_phi3()["module"]
    head, half = module.head_size, module.rotary_dim // 2
    n = positions.numel()
    q = torch.cat((torch.ones(n, half), torch.zeros(n, half)), dim=-1)
    out, _ = module(positions, q, q.clone())
    return out, head


def _tf_phi3_rows(positions, seq_len):
    from transformers import Phi3Config

    phi = dict(_phi3())
    phi.pop("model_type")
    inv, att = ROPE_INIT_FUNCTIONS["longrope"](Phi3Config(**phi), "cpu", seq_len=seq_len)
    ang = positions.float()[:, None] * inv[None, :]
    return torch.cat((ang.cos() * att, ang.sin() * att), dim=-1).double(), ang.double()


def test_sglang_longrope_matches_transformers_below_and_above_the_switch():
    """A batch within the original context reads the short cache, one beyond
    it the long cache: transformers' short and long factors and factor, within
    float32 rounding. Each side rounds the exponent 2i/d (relative u, which
    base**x amplifies by x ln(base) <= ln(base)), then pow, the product with
    the factor, the division and the angle (4u): |d theta| <= 2 (ln base + 4)
    u theta; cos, sin and the factor add 2u a side on values <= 1.2."""
    phi = _phi3()
    o = phi["original_max_position_embeddings"]
    c = 2 * (math.log(phi["rope_theta"]) + 4) * U
    for positions, seq_len in ((torch.arange(0, o), o), (torch.arange(o - 100, o + 900),
                                                          o + 900)):
        rows, _ = _sglang_phi3_rows(positions)
        tf, ang = _tf_phi3_rows(positions, seq_len)
        theta = torch.cat((ang, ang), dim=-1)
        assert ((rows.double() - tf).abs() <= 1.2 * (theta * c + 8 * U)).all()


def test_sglang_longrope_one_long_request_switches_the_whole_batch():
    """vllm-project/vllm issue #6283 (same code then): the switch is any()
    over the batch, so a short request decoded beside a long one reads the
    long factors; transformers rotates it with the short ones."""
    phi = _phi3()
    o = phi["original_max_position_embeddings"]
    alone, _ = _sglang_phi3_rows(torch.tensor([100]))
    batched, _ = _sglang_phi3_rows(torch.tensor([100, o + 5000]))
    tf, ang = _tf_phi3_rows(torch.tensor([100]), 101)
    theta = torch.cat((ang, ang), dim=-1)  # bound of the previous test
    c = 2 * (math.log(phi["rope_theta"]) + 4) * U
    assert ((alone.double() - tf).abs() <= 1.2 * (theta * c + 8 * U)).all()
    assert not torch.allclose(batched[:1].double(), tf, atol=1e-3)


def test_sglang_longrope_at_exactly_original_plus_one_tokens():
    """With positions 0..original (original + 1 tokens) transformers uses the
    long factors (seq_len > original); SGLang's any(positions > original) is
    false, so it reads the short cache, which has only `original` rows: the
    last token reads the long cache's row 0, the rotation of position 0."""
    o = _phi3()["original_max_position_embeddings"]
    positions = torch.arange(0, o + 1)
    rows, head = _sglang_phi3_rows(positions)
    tf, _ = _tf_phi3_rows(positions, o + 1)
    half = head // 2
    long_ms = _tf_phi3_rows(torch.tensor([0]), o + 1)[0][0, 0].item()  # cos(0) * factor
    assert torch.allclose(rows[-1, :half].double(),
                          torch.full((half,), long_ms, dtype=torch.float64), rtol=2 * U)
    assert (rows[-1, half:] == 0).all()
    assert not torch.allclose(rows[-1].double(), tf[-1], atol=1e-3)
    # the other tokens: short factors where transformers uses the long ones
    assert not torch.allclose(rows[1:-1].double(), tf[1:-1], atol=1e-3)


def _hf_rope(config, seq_len=None):
    """transformers 4.57.6 run on a table config: its own config class (text
    part), then ROPE_INIT_FUNCTIONS of its rope type."""
    from transformers import AutoConfig

    from posenc_lib import config_reader

    d = dict(config)
    model_type = config_reader.MODEL_TYPE_ALIASES.get(d.pop("model_type"), config["model_type"])
    text = AutoConfig.for_model(model_type, **d).get_text_config()
    rs = getattr(text, "rope_scaling", None) or {}
    rope_type = rs.get("rope_type", rs.get("type")) or "default"
    if rope_type == "mrope":
        rope_type = "default"
    return ROPE_INIT_FUNCTIONS[rope_type](text, "cpu", seq_len=seq_len)


#: Where SGLang's get_rope run for a table model differs from transformers:
#: Gemma 3's get_rope call (the one forward_cpu uses, AMX CPUs) passes
#: {"rope_type": "default"} for every layer (gemma3_causal.py lines 202, 216),
#: so its global layers lose the linear factor 8 in every pair.
SGLANG_GET_ROPE_DIFFERS = {"gemma-3-27b-it"}


def test_sglang_get_rope_on_every_table_model_against_transformers_and_the_library():
    """For every table model SGLang runs itself, the get_rope its model file
    calls: the cos/sin cache rows at 0, 1, original - 1, original and the
    last position, the frequencies and the factor against transformers 4.57.6
    (run: ROPE_INIT_FUNCTIONS on the model's own config class) and against
    the library (engines.engine_rope(config, "transformers")). They agree
    except for SGLANG_GET_ROPE_DIFFERS, and there they differ. Rows: SGLang's
    angle t * inv and transformers' differ by the relative frequency
    difference r plus one rounding (u) of each product, so cos and sin by
    theta (r + 2u) + 4u (two 2-ulp kernels), times the factor, plus 2u for
    its own rounding."""
    seen = set()
    for name, config in _models().items():
        args = engines.sglang_get_rope_args(config)
        if args is None:
            continue
        orig = (args["rope_scaling"] or {}).get("original_max_position_embeddings",
                                                args["max_position"])
        last = args["max_position"] - 1
        run = engines.sglang_rope(config, positions=[orig - 1, orig, last])
        tf_inv, tf_att = _hf_rope(config)
        lib = engines.engine_rope(config, "transformers")
        assert torch.equal(tf_inv.float(), lib["inv_freq"]), name
        assert tf_att == pytest.approx(lib["factor"], rel=1e-15), name
        diff = engines.frequency_difference(run["inv_freq"], tf_inv.float())
        if name in SGLANG_GET_ROPE_DIFFERS:
            assert diff["pairs_differ"] > 0, name
            seen.add(name)
            continue
        assert diff["pairs_differ"] == 0, (name, diff)
        assert run["factor"] == pytest.approx(tf_att, rel=2 * U), name
        assert run["logit_scale"] == pytest.approx(lib["logit_scale"], rel=1e-12), name
        r = float((run["inv_freq"].double() / tf_inv.double() - 1).abs().max())
        phi3 = run["class"] == "Phi3LongRoPEScaledRotaryEmbedding"
        length = run["cache_length"][0]
        positions = [p for p in (0, 1, orig - 1, orig, last) if p < length]
        ref_inv = [tf_inv] * len(positions)
        if phi3:  # the long cache's rows follow: positions 0, 1, orig - 1, orig, last
            long_inv, _ = _hf_rope(config, seq_len=last + 1)
            ref_inv += [long_inv] * 5
            positions += [0, 1, orig - 1, orig, last]
        rows = run["rows"].double()
        assert rows.shape[0] == len(positions), name
        for row, p, inv in zip(rows, positions, ref_inv):
            ang = (torch.tensor(float(p)) * inv.float()).double()
            ref = torch.cat((ang.cos(), ang.sin())) * tf_att
            tol = (torch.cat((ang, ang)) * (r + 2 * U) + 6 * U) * tf_att
            assert ((row - ref).abs() <= tol).all(), (name, p)
    assert seen == SGLANG_GET_ROPE_DIFFERS


def test_sglang_runs_gemma3_through_transformers_code_and_notes_the_amx_path():
    """Gemma 3 under SGLang: forward_native rotates with Gemma3RotaryEmbedding
    (transformers' ROPE_INIT_FUNCTIONS, so transformers' frequencies); the
    note reports the get_rope path of forward_cpu, whose frequencies are
    transformers' times 8 in all 64 pairs."""
    config = _models()["gemma-3-27b-it"]
    rope = engines.engine_rope(config, "sglang")
    tf = engines.engine_rope(config, "transformers")
    assert torch.equal(rope["inv_freq"], tf["inv_freq"]) and "Gemma3Rotary" in rope["via"]
    assert rope["notes"] == [
        ("forward_cpu (AMX CPUs) rotates with get_rope's RotaryEmbedding instead: 64 of 64 "
         "pairs differ, up to 8x (gemma3_causal.py lines 186-224, 269)")]
    amx = engines.sglang_rope(config)
    assert torch.allclose(amx["inv_freq"], 8 * tf["inv_freq"], rtol=4 * U, atol=0)


def test_sglang_deepseek_builds_deepseek_scaling_with_the_softmax_mscale_squared():
    """SGLang's DeepSeek model file rewrites rope_type to deepseek_yarn:
    get_rope builds DeepseekScalingRotaryEmbedding (mscale ratio 1 on cos and
    sin) and the attention multiplies its softmax scale by mscale(s,
    mscale_all_dim)**2, transformers' DeepseekV3Attention factor (run)."""
    from transformers.models.deepseek_v3.modeling_deepseek_v3 import yarn_get_mscale

    for name in ("deepseek-v3", "kimi-k2-instruct", "deepseek-v3.2"):
        config = _models()[name]
        run = engines.sglang_rope(config)
        rs = config["rope_scaling"]
        assert run["class"] == "DeepseekScalingRotaryEmbedding" and run["factor"] == 1.0
        assert run["logit_scale"] == yarn_get_mscale(rs["factor"], rs["mscale_all_dim"]) ** 2


# ---- the inspector's engine rows ----------------------------------------------

def _rows(capsys, *argv):
    from posenc_lib.tools import inspector

    assert inspector.main(list(argv)) == 0
    out = capsys.readouterr().out.splitlines()
    return {r.strip()[:18].strip(): r.strip()[19:] for r in out if r.startswith("  ")}


def test_inspector_gpt_oss_frequencies_per_engine(capsys):
    """gpt-oss: vLLM (which reads truncate) rotates with transformers'
    frequencies, llama.cpp differs in 9 of 32 pairs and says why; the
    serving line, which describes transformers' schedule, says so."""
    rows = _rows(capsys, "gpt-oss-20b", "--engine", "vllm")
    assert rows["engine freqs"].startswith("vllm: transformers' own")
    assert rows["serving"].startswith("transformers: ")
    rows = _rows(capsys, "gpt-oss-20b", "--engine", "llama.cpp")
    assert rows["engine freqs"].startswith(
        "llama.cpp: differ from transformers' in 9 of 32 pairs, by up to 1.763x")
    assert "truncate=false" in rows["engine freqs"]
    assert "engine freqs" not in _rows(capsys, "gpt-oss-20b")


def test_inspector_deepseek_softmax_and_phi3_max_model_len(capsys):
    rows = _rows(capsys, "deepseek-v3", "--engine", "vllm")
    assert rows["engine softmax"].startswith("vllm: scale x 1.87385")
    rows = _rows(capsys, "phi-3-mini-128k-instruct", "--engine", "vllm")
    assert "differ from transformers' in 48 of 48 pairs" in rows["engine freqs"]
    assert "long factors for every request (max_model_len 131,072)" in rows["engine freqs"]
    rows = _rows(capsys, "phi-3-mini-128k-instruct", "--engine", "vllm",
                 "--max-model-len", "4096")
    assert "transformers' own" in rows["engine freqs"]
    rows = _rows(capsys, "phi-3-mini-128k-instruct", "--engine", "llama.cpp",
                 "--max-model-len", "4097")
    assert "long factors for every token" in rows["engine freqs"]


# ---- make engines: the recorded run -----------------------------------------

ROOT = Path(__file__).resolve().parents[1]


def _script():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "compare_llama_cpp", ROOT / "scripts" / "engines" / "compare_llama_cpp.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_make_engines_results_are_a_complete_passing_run_of_the_library_tree():
    """results/engines.json records a run of `make engines` on llama.cpp at the
    commit this library cites, with every case of the script, each with the
    figures its prediction needs, inside the script's stated tolerances."""
    import json

    script = _script()
    result = json.loads((ROOT / "results" / "engines.json").read_text())
    assert result["ggml_commit"] == engines.LLAMA_CPP["commit"]
    assert result["package"] == engines.LLAMA_CPP["package"]
    assert result["head_dim"] >= 64
    cases = {c["case"]: c for c in result["cases"]}
    assert set(cases) == set(script.CASES)
    for name, c in cases.items():
        assert c["prediction"] == script.CASES[name][0], name
        assert c["passed"], (name, c.get("problems"), c.get("error"))
        if c["prediction"] == "agree":
            assert c["vs_transformers"] <= result["agree"], name
        else:
            assert c["vs_transformers"] > 10 * result["agree"], name
            assert c["vs_prediction"] <= result["agree"], name
    assert cases["qwen2-vl-mrope"]["shift_vs_fresh"] == "refused"
    assert cases["qwen2"]["shift_vs_fresh"] <= result["shift_agree"]
    assert cases["qwen2-yarn"]["shift_vs_fresh"] > 10 * result["shift_agree"]


@pytest.mark.parametrize("case, n_ctx", [
    ("qwen2-yarn", None), ("qwen2-yarn-attention-factor", None),
    ("gpt-oss-truncate-false", None), ("llama3.1-rope-freqs", None),
    ("phi3-longrope", 256), ("phi3-longrope-short-prompt", 256), ("llama", None),
])
def test_make_engines_predictions_are_the_librarys(case, n_ctx):
    """Each case's prediction in the script is what posenc_lib.tools.engines computes
    for that case's config: llama.cpp's frequencies or factor differ from
    transformers' exactly where the script predicts "differ"."""
    script = _script()
    config = script.config_for(case, 300, 2).to_dict()
    tf_seq = 64 if case == "phi3-longrope-short-prompt" else 256
    tf_inv, tf_factor = scaling.rope_from_config(config, seq_len=tf_seq,
                                                 reference="transformers",
                                                 dtype=torch.float32)
    cpp = engines.engine_rope(config, "llama.cpp", n_ctx=n_ctx)
    differs = (engines.frequency_difference(cpp["inv_freq"], tf_inv.float())["pairs_differ"]
               > 0 or not math.isclose(cpp["factor"], tf_factor, rel_tol=1e-6))
    assert differs == (script.CASES[case][0] == "differ")


def test_crosscheck_engine_vllm_runs_vllm_and_checks_the_report(capsys):
    """--crosscheck --engine vllm compares vLLM's own cos/sin (vendored, run)
    with transformers' at positions up to the report's length, with a float32
    bound below 1, and fails when the report's frequency claim is wrong."""
    from posenc_lib.tools import inspector

    _, config = inspector.load_config("gpt-oss-20b")
    report = inspector.inspect_config(config, engine="vllm")
    ok, text = inspector.crosscheck_vllm(config, report)
    assert ok and "as reported" in text and "131071" in text
    wrong = {**report, "engine_rope": {**report["engine_rope"],
                                       "frequencies": {"pairs_differ": 3}}}
    assert not inspector.crosscheck_vllm(config, wrong)[0]
    _, phi = inspector.load_config("phi-3-mini-128k-instruct")
    ok, text = inspector.crosscheck_vllm(phi, inspector.inspect_config(phi, engine="vllm"))
    assert ok and "differ from transformers'" in text
    # Llama 4's 10M positions: cut where the float32 bound would pass 1/4
    _, l4 = inspector.load_config("llama-4-scout-17b-16e-instruct")
    ok, text = inspector.crosscheck_vllm(l4, inspector.inspect_config(l4, engine="vllm"))
    assert ok and "positions cut to" in text


def _rope_type_configs():
    """One config per rope type the library claims (engines.ROPE_TYPES)."""
    models = _models()
    blocks = {"linear": {"rope_type": "linear", "factor": 4.0},
              "dynamic": {"rope_type": "dynamic", "factor": 4.0},
              "yarn": {"rope_type": "yarn", "factor": 4.0,
                       "original_max_position_embeddings": 4096, "truncate": False},
              "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                         "high_freq_factor": 4.0, "original_max_position_embeddings": 4096}}
    out = {t: _llama(128, 500000.0, 4096 * 4, b) for t, b in blocks.items()}
    out["default"] = _llama(128, 500000.0)
    out["longrope"] = models["phi-3-mini-128k-instruct"]
    out["mrope"] = models["qwen2.5-vl-7b-instruct"]
    assert set(out) == set(engines.ROPE_TYPES)
    return out


#: Rope types whose SGLang frequencies differ from transformers' at the
#: config's own length: dynamic NTK (one static cache with the base of
#: max_position_embeddings * factor, rope_variant.py lines 880-892).
SGLANG_TYPES_DIFFER = {"dynamic"}


@pytest.mark.parametrize("rope_type", engines.ROPE_TYPES)
def test_sglang_every_rope_type_against_transformers_and_the_library(rope_type):
    """For every rope type the library claims: SGLang's get_rope (vendored,
    run as the model file calls it) against transformers 4.57.6 (run) and
    the library, frequencies and factor; agreement except for
    SGLANG_TYPES_DIFFER, and there a difference."""
    config = _rope_type_configs()[rope_type]
    run = engines.sglang_rope(config)
    tf_inv, tf_att = _hf_rope(config)
    lib = engines.engine_rope(config, "transformers")
    assert engines.frequency_difference(lib["inv_freq"], tf_inv.float())["pairs_differ"] == 0
    for ref in (tf_inv.float(), lib["inv_freq"]):
        diff = engines.frequency_difference(run["inv_freq"], ref)
        assert (diff["pairs_differ"] > 0) == (rope_type in SGLANG_TYPES_DIFFER), diff
    assert run["factor"] == pytest.approx(tf_att, rel=2 * U)
    assert run["factor"] == pytest.approx(lib["factor"], rel=2 * U)
    summary = engines.engine_summary(config, "sglang")
    assert summary["factor"] == run["factor"] and "vendored, run" in summary["via"]


# ---- KV-cache sizing per engine, against the engines' own figures -----------

def _engines_json():
    import json

    return json.loads((ROOT / "results" / "engines.json").read_text())


def _mib_close(predicted_bytes: int, printed_mib: float, terms: int = 1) -> bool:
    """llama.cpp prints (float)bytes / 2**20 with %7.2f: the printed figure is
    within half a unit in the second decimal (0.005 MiB) of the exact one; the
    float cast adds at most 2**-24 relative, under 1e-5 MiB for the caches
    recorded (at most 64 MiB). A sum of ``terms`` printed figures: that many."""
    return abs(predicted_bytes / 2**20 - printed_mib) <= terms * (0.005 + 1e-5)


def test_llama_cpp_kv_cache_is_the_size_llama_cpp_allocated():
    """For every case of make engines, at every recorded context (n_ctx 256 to
    32,768; f16, q8_0, q4_0; swa_full on and off; n_ubatch 512 and 64), the
    library's llama.cpp cache has the cells and layers llama.cpp's own log
    reports for each cache (full, then sliding), and its K and V sizes agree
    with llama.cpp's printed MiB: the 256-cell padding, ggml's block sizes,
    the K-only MLA latent and the iSWA size are llama.cpp's, not a transcription
    checked against itself."""
    result = _engines_json()
    seen = {"types": set(), "n_ctx": set(), "swa_full": set(), "mla": False}
    for case in result["cases"]:
        assert case.get("kv"), case["case"]
        for p in case["kv"]:
            assert "error" not in p, (case["case"], p.get("error"))
            ours = engines.engine_kv_cache_bytes(
                case["kv_config"], "llama.cpp", n_ctx=p["n_ctx"], cache_dtype=p["type_k"],
                cache_dtype_v=p["type_v"], swa_full=p["swa_full"], n_batch=p["n_batch"],
                n_ubatch=p["n_ubatch"], flash_attn=p["flash_attn"])
            by_type = ours["by_layer_type"]
            predicted = ([by_type["full_attention"]] if "full_attention" in by_type else []) \
                + [v for k, v in by_type.items() if k != "full_attention"]
            measured = [c for c in p["caches"] if c["layers"]]
            where = (case["case"], p["n_ctx"], p["type_k"], p["swa_full"], p["n_ubatch"])
            assert len(predicted) == len(measured), where
            for a, m in zip(predicted, measured):
                assert (a["layers"], a["cells"]) == (m["layers"], m["cells"]), where
                assert (m["k_type"], m["v_type"]) == (p["type_k"], p["type_v"]), where
                assert _mib_close(a["layers"] * a["cells"] * a["k_row_bytes"], m["k_mib"]), where
                assert _mib_close(a["layers"] * a["cells"] * a["v_row_bytes"], m["v_mib"]), where
            assert _mib_close(ours["bytes"], sum(m["size_mib"] for m in measured),
                              len(measured)), where
            seen["types"].add(p["type_k"])
            seen["n_ctx"].add(p["n_ctx"])
            if "sliding_attention" in by_type:
                seen["swa_full"].add(p["swa_full"])
            seen["mla"] |= "kv_lora_rank" in case["kv_config"]
    assert {"f16", "q8_0"} <= seen["types"] and len(seen["n_ctx"]) >= 3
    assert seen["swa_full"] == {True, False} and seen["mla"]


def test_llama_cpp_mla_caches_the_latent_once_and_swa_a_window():
    """Figures the recorded run pins down: the MLA case's V cache is empty
    (0.00 MiB) and its K holds kv_lora_rank + qk_rope_head_dim values a cell;
    gpt-oss's sliding layer holds pad256(min(n_ctx, 32 + n_ubatch)) cells."""
    cases = {c["case"]: c for c in _engines_json()["cases"]}
    mla = cases["deepseek-v2-lite-mla"]
    p = next(p for p in mla["kv"] if p["n_ctx"] == 32768 and p["type_k"] == "f16")
    (cache,) = p["caches"]
    assert cache["v_mib"] == 0.0 and cache["k_mib"] == 32768 * 2 * (64 + 64) * 2 / 2**20
    oss = cases["gpt-oss-truncate-false"]
    cells = {(p["n_ctx"], p["n_ubatch"], p["swa_full"]): [c["cells"] for c in p["caches"]]
             for p in oss["kv"]}
    assert cells[(4096, 512, False)] == [4096, 768]
    assert cells[(4096, 64, False)] == [4096, 256]
    assert cells[(1000, 512, True)] == [1024, 1024]


def test_vllm_kv_pages_are_vllm_0_33_0s_for_mla_full_and_sliding():
    """vLLM 0.33.0's own spec classes (run by scripts/engines/vllm_kv_pages.py):
    the page size and per-layer reservation of DeepSeek's MLA latent, full
    attention and gpt-oss's sliding layers, in bfloat16 and fp8, are the
    library's."""
    from posenc_lib.tools import inspector

    stored = _engines_json()["vllm_kv"]
    assert stored["package"] == "vllm==0.33.0"
    assert {e["kv_cache_dtype"] for e in stored["entries"]} == {"auto", "fp8"}
    assert {e["spec"] for e in stored["entries"]} >= {"MLAAttentionSpec",
                                                       "FullAttentionSpec",
                                                       "SlidingWindowSpec"}
    for e in stored["entries"]:
        ours = engines.engine_kv_cache_bytes(
            inspector.model_config(e["model"]), "vllm", n_ctx=stored["max_model_len"],
            cache_dtype=e["kv_cache_dtype"], block_size=stored["block_size"],
            scheduled_tokens=stored["max_in_flight_tokens"])
        info = ours["by_layer_type"][e["layer_type"]]
        assert info["page_size_bytes"] == e["page_size_bytes"], e
        assert info["blocks"] * info["page_size_bytes"] == e["max_memory_usage_bytes"], e
    # the figures themselves: MLA's 576 values a token, 16 tokens a page
    mla = {e["kv_cache_dtype"]: e["page_size_bytes"] for e in stored["entries"]
           if e["spec"] == "MLAAttentionSpec"}
    assert mla == {"auto": 16 * 576 * 2, "fp8": 16 * 576}


@SETTINGS
@given(kv_heads=st.sampled_from([1, 2, 8]), head_dim=st.sampled_from([64, 128]),
       layers=st.integers(1, 6), blocks=st.integers(1, 40),
       mla=st.booleans())
def test_llama_cpp_f16_and_vllm_bf16_agree_where_both_cache_every_token(
        kv_heads, head_dim, layers, blocks, mla):
    """Two independent paths (serving's vLLM blocks, this module's llama.cpp
    cells): at an n_ctx that is a multiple of 256, a model without sliding
    layers caches n_ctx tokens of the same values in both, MLA's latent
    included, so the byte counts are equal; q8_0 is 17/16 of half of them."""
    config = {"model_type": "llama", "num_hidden_layers": layers,
              "num_attention_heads": 8, "num_key_value_heads": kv_heads,
              "hidden_size": 8 * head_dim, "head_dim": head_dim}
    if mla:
        config = {"model_type": "deepseek_v3", "num_hidden_layers": layers,
                  "num_attention_heads": 8, "hidden_size": 1024, "kv_lora_rank": 512,
                  "qk_rope_head_dim": 64, "qk_nope_head_dim": 128, "v_head_dim": 128}
    n_ctx = 256 * blocks
    cpp = engines.engine_kv_cache_bytes(config, "llama.cpp", n_ctx=n_ctx)
    vllm = engines.engine_kv_cache_bytes(config, "vllm", n_ctx=n_ctx)
    assert cpp["bytes"] == vllm["bytes"]
    q8 = engines.engine_kv_cache_bytes(config, "llama.cpp", n_ctx=n_ctx, cache_dtype="q8_0")
    assert q8["bytes"] * 32 == cpp["bytes"] // 2 * 34
    fp8 = engines.engine_kv_cache_bytes(config, "vllm", n_ctx=n_ctx, cache_dtype="fp8")
    assert fp8["bytes"] * 2 == vllm["bytes"]


@pytest.mark.parametrize("kwargs, name", [
    ({"engine": "sglang"}, "engine"),
    ({"engine": "vllm", "cache_dtype": "q8_0"}, "cache_dtype"),
    ({"engine": "llama.cpp", "cache_dtype": "fp8"}, "cache_dtype"),
    ({"engine": "llama.cpp", "cache_dtype_v": "q3_k"}, "cache_dtype_v"),
    ({"engine": "vllm", "cache_dtype_v": "fp8"}, "cache_dtype_v"),
    ({"engine": "llama.cpp", "cache_dtype": "q8_0", "flash_attn": False}, "flash_attn"),
    ({"engine": "llama.cpp", "n_ctx": 0}, "n_ctx"),
    ({"engine": "llama.cpp", "n_ubatch": 0}, "n_ubatch"),
    ({"engine": "vllm", "cache_dtype": ["fp8"]}, "cache_dtype"),
    ({"engine": "llama.cpp", "cache_dtype": {"k": "f16"}}, "cache_dtype"),
])
def test_engine_kv_cache_bytes_names_the_bad_parameter(kwargs, name):
    from posenc_lib.tools import inspector

    config = inspector.model_config("llama-3.1-8b")
    kwargs = {"n_ctx": 4096, **kwargs}
    with pytest.raises(ValueError, match=name):
        engines.engine_kv_cache_bytes(config, **kwargs)


def test_engine_kv_cache_bytes_refuses_what_llama_cpp_refuses():
    """MLA with two cache types (llama_init_from_model refuses), a head that
    is not a whole number of q8_0 blocks, DeepSeek-V3.2's DSA cache."""
    from posenc_lib.tools import inspector

    ds = inspector.model_config("deepseek-v3.1")
    with pytest.raises(ValueError, match="cache_dtype_v"):
        engines.engine_kv_cache_bytes(ds, "llama.cpp", n_ctx=4096, cache_dtype="q8_0",
                                      cache_dtype_v="f16")
    odd = {"model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 2,
           "num_key_value_heads": 1, "hidden_size": 40, "head_dim": 20}
    with pytest.raises(ValueError, match="multiple of 32"):
        engines.engine_kv_cache_bytes(odd, "llama.cpp", n_ctx=256, cache_dtype="q8_0")
    with pytest.raises(ValueError, match="indexer"):
        engines.engine_kv_cache_bytes(inspector.model_config("deepseek-v3.2"), "llama.cpp",
                                      n_ctx=4096)


def test_inspector_kv_row_is_the_engines(capsys):
    """--engine llama.cpp / vllm with --cache-dtype: the report's KV cache is
    that engine's (labelled by it), never transformers' number; a cache type the
    engine does not take is refused naming --cache-dtype."""
    from posenc_lib.tools import inspector

    config = inspector.model_config("deepseek-v3.1")
    cpp = inspector.inspect_config(config, engine="llama.cpp")["kv_cache"]
    n = cpp["length"]
    assert cpp["engine"] == "llama.cpp" and cpp["bytes_at_length"] == \
        engines.engine_kv_cache_bytes(config, "llama.cpp", n_ctx=n)["bytes"] == \
        61 * 576 * 2 * n  # the latent, f16, once: n is a multiple of 256
    fp8 = inspector.inspect_config(config, engine="vllm", cache_dtype="fp8")["kv_cache"]
    auto = inspector.inspect_config(config, engine="vllm")["kv_cache"]
    assert fp8["bytes_per_value"] == 1 and 2 * fp8["bytes_at_length"] == \
        auto["bytes_at_length"] == cpp["bytes_at_length"]
    assert fp8["page_size_bytes"] == {"full_attention": 16 * 576}
    assert inspector.main(["gpt-oss-20b", "--engine", "llama.cpp", "--cache-dtype",
                         "q8_0"]) == 0
    out = capsys.readouterr().out
    kv_row = next(line for line in out.splitlines() if line.strip().startswith("KV cache"))
    assert "llama.cpp:" in kv_row and "-ctk q8_0" in kv_row and "keeps 768 tokens" in kv_row
    assert "not transcribed" not in out
    assert inspector.main(["llama-3.1-8b", "--engine", "transformers", "--cache-dtype",
                         "fp8"]) == 2
    assert "--cache-dtype" in capsys.readouterr().err
    assert inspector.main(["llama-3.1-8b", "--engine", "vllm", "--cache-dtype",
                         "q8_0"]) == 2
