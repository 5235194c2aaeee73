"""Which features of a head a model's own attention code turns, and how fast.

:func:`probe_model` builds a one-layer model of a given ``model_type`` with tiny
random weights in transformers, runs it on single tokens at position 0, 1 and
``far`` (float64), and reads the queries and keys as they reach the attention
kernel (``torch.nn.functional.scaled_dot_product_attention``, or the model's own
``_attn`` where it has no SDPA path). RoPE turns nothing at position 0, so the
vectors at 0 are the unrotated ones and ``R(p)`` solves ``x(p) = R(p) x(0)`` over
many tokens. :func:`read_rotation` reads ``R(1)``: which features pair, in which
order, and at which angle; the rotation at ``far`` must then be the same pairs
turned ``far`` times as far, so that the whole layout is read from the code at
positions where it matters (at 0 every layout is the identity).

:func:`match_layouts` says which of :data:`posenc_lib.designs.LAYOUTS` reproduces a
probe. ``PROBES`` lists the models of the chapter's table with the layout the book
puts them in (its claim; the probe decides), the configuration that makes their
rotated slice ``rotary`` of ``head_dim`` features, and what vLLM passes to its
rotary embedding for the same model (``VLLM``, read from the vLLM 0.33.0 wheel on
PyPI, file ``vllm/model_executor/models/<file>``, lines cited).

The module runs under transformers 4.57 (the project's environment) and 5.x
(``scripts/probe_conventions.py``, whose output ``results/conventions.json`` holds
the models only 5.x has).
"""

from __future__ import annotations

import json
import math
from contextlib import contextmanager
from pathlib import Path

import torch

from . import designs

HEAD_DIM, BASE = 16, 10000.0
_COMMON = {"vocab_size": 256, "hidden_size": 64, "num_attention_heads": 4,
           "num_key_value_heads": 4, "num_hidden_layers": 1, "intermediate_size": 32,
           "max_position_embeddings": 4096}
_HALF = {"partial_rotary_factor": 0.5}
_MLA = {"q_lora_rank": None, "kv_lora_rank": 16, "qk_rope_head_dim": 8,
        "qk_nope_head_dim": 8, "v_head_dim": 8, "moe_intermediate_size": 16,
        "n_routed_experts": 4, "num_experts_per_tok": 2, "first_k_dense_replace": 1}

#: name -> (model_type, config keywords, the layout the book puts it in,
#: transformers major version that has it (4: both 4.57 and 5.x),
#: vLLM's (rotary_dim, is_neox_style) for it (None: no such model file), where vLLM
#: says so). d is head_dim, p partial_rotary_factor, vLLM 0.33.0 (PyPI wheel, built
#: 2026-11-01 from commit 4ba787ec9), files under vllm/model_executor/models/.
PROBES = {
    "GPT-NeoX": ("gpt_neox", {"rotary_pct": 0.5, "rotary_emb_base": BASE},
                 "partial", 4, None, "no gpt_neox.py"),
    "Phi": ("phi", _HALF, "partial", 4, None, "no phi.py"),
    "StableLM": ("stablelm", {**_HALF, "rope_theta": BASE}, "partial", 4,
                 "(d·p, True)", "stablelm.py L149-153 (get_rope's default)"),
    "GLM-4.5 (glm4_moe)": ("glm4_moe", {**_HALF, "head_dim": HEAD_DIM,
                                         "n_routed_experts": 4, "num_experts_per_tok": 2,
                                         "first_k_dense_replace": 1,
                                         "moe_intermediate_size": 16},
                           "partial", 4, "(d·p, True)", "glm4_moe.py L280-285"),
    "Qwen3-Next": ("qwen3_next", {"head_dim": HEAD_DIM, "partial_rotary_factor": 0.5,
                                  "layer_types": ["full_attention"], "num_experts": 4,
                                  "num_experts_per_tok": 2, "moe_intermediate_size": 16,
                                  "shared_expert_intermediate_size": 16},
                   "partial", 4, "(d·p, True)", "qwen3_next.py L336-342"),
    "GPT-J": ("gptj", {"n_embd": 64, "n_head": 4, "n_layer": 1, "rotary_dim": 8,
                       "n_positions": 4096},
              "partial_adjacent", 4, "(rotary_dim, False)", "gpt_j.py L94-102"),
    "CodeGen": ("codegen", {"n_embd": 64, "n_head": 4, "n_layer": 1, "rotary_dim": 8,
                            "n_positions": 4096, "n_ctx": 4096},
                "partial_adjacent", 4, None, "no codegen.py"),
    "GLM (glm)": ("glm", {**_HALF, "head_dim": HEAD_DIM, "pad_token_id": 0},
                  "partial_adjacent", 4, None, "no glm.py"),
    "GLM-4 (glm4)": ("glm4", {**_HALF, "head_dim": HEAD_DIM, "pad_token_id": 0},
                     "partial_adjacent", 4, "(d·p, False)", "glm4.py L83-115"),
    "Gemma 4": ("gemma4_text", {"head_dim": HEAD_DIM, "global_head_dim": HEAD_DIM,
                                "layer_types": ["full_attention"],
                                "rope_parameters": {
                                    "full_attention": {"rope_type": "proportional",
                                                       "partial_rotary_factor": 0.5,
                                                       "rope_theta": BASE},
                                    "sliding_attention": {"rope_type": "default",
                                                          "rope_theta": BASE}}},
                "proportional", 5, "(d·p, True)",
                "gemma4.py L450-498, into Gemma4RotaryEmbedding, which spaces the "
                "frequencies over the whole head and pads cos = 1, sin = 0 "
                "(rotary_embedding/gemma4_rope.py, rotary_embedding/__init__.py L156-164)"),
    "DeepSeek-V2": ("deepseek_v2", {**_MLA, "rope_theta": BASE}, "trailing", 4,
                    "(qk_rope_head_dim, False)",
                    "deepseek_v2.py L549-553 (DeepseekV2Attention), L1122-1127 "
                    "(DeepseekV2MLAAttention)"),
    "DeepSeek-V3": ("deepseek_v3", {**_MLA, "rope_theta": BASE, "rope_interleave": True},
                    "trailing", 4, "(qk_rope_head_dim, False)",
                    "the same lines: registry.py L94 maps DeepseekV3ForCausalLM to "
                    "deepseek_v2.py"),
    "Mistral 4": ("mistral4", {**_MLA, "rope_interleave": True}, "trailing", 5, None,
                  "no mistral4 model file"),
    "DeepSeek-V3, rope_interleave=False": (
        "deepseek_v3", {**_MLA, "rope_theta": BASE, "rope_interleave": False},
        "trailing_half", 4, None,
        "MLA always passes is_neox_style=False (deepseek_v2.py L549-553, L1122-1127): "
        "the flag is not read"),
    "Mistral 4, rope_interleave=False": ("mistral4", {**_MLA, "rope_interleave": False},
                                         "trailing_half", 5, None,
                                         "no mistral4 model file"),
}

RESULTS = Path(__file__).resolve().parents[1] / "results"


def stored_probes() -> dict:
    """``results/conventions.json``: every model of :data:`PROBES`, probed in
    transformers 5.x by ``scripts/probe_conventions.py``."""
    return json.loads((RESULTS / "conventions.json").read_text())


def stored_proportional() -> dict:
    """``results/designs_v5.json``: transformers 5.x's ``"proportional"`` frequencies,
    stored by ``scripts/check_designs_v5.py``."""
    return json.loads((RESULTS / "designs_v5.json").read_text())


def _major() -> int:
    import transformers

    return int(transformers.__version__.split(".")[0])


def _config(model_type: str, keywords: dict):
    from transformers import AutoConfig

    keywords = dict(keywords)
    if model_type in ("gptj", "codegen"):
        config = AutoConfig.for_model(model_type, vocab_size=256, **keywords)
    else:
        fields = {**_COMMON, **keywords}
        if model_type in ("mistral4",):
            fields["rope_parameters"] = {
                "rope_type": "yarn", "rope_theta": BASE, "factor": 1.0,
                "original_max_position_embeddings": 4096, "beta_fast": 32.0,
                "beta_slow": 1.0, "mscale": 1.0, "mscale_all_dim": 1.0,
                "llama_4_scaling_beta": 0.1}
        elif "rope_parameters" not in fields and _major() >= 5 \
                and model_type not in ("gpt_neox",):
            fields["rope_parameters"] = {"rope_type": "default", "rope_theta": BASE}
            if "partial_rotary_factor" in fields:
                fields["rope_parameters"]["partial_rotary_factor"] = \
                    fields.pop("partial_rotary_factor")
            fields.pop("rope_theta", None)
        elif model_type == "gpt_neox" and _major() >= 5:
            fields["rope_parameters"] = {"rope_type": "default", "rope_theta": BASE,
                                         "partial_rotary_factor": fields.pop("rotary_pct")}
            fields.pop("rotary_emb_base")
        config = AutoConfig.for_model(model_type, **fields)
    return config


class _Seen(Exception):
    """Raised once the first attention call is recorded: nothing after it is needed
    (and the MoE layers of some 5.x models have no float64 kernel)."""


@contextmanager
def _capture(model):
    """Record the (query, key) of the first attention call of ``model``, then stop."""
    seen = []
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def spy(query, key, *args, **kwargs):
        seen.append((query.detach().clone(), key.detach().clone()))
        raise _Seen

    patched = []
    for module in model.modules():  # models without an SDPA path (GPT-J, CodeGen)
        if hasattr(module, "_attn") and callable(module._attn):
            original = module._attn

            def attn(query, key, *args, _original=original, **kwargs):
                seen.append((query.detach().clone(), key.detach().clone()))
                raise _Seen

            module._attn = attn
            patched.append(module)
    torch.nn.functional.scaled_dot_product_attention = spy
    try:
        yield seen
    finally:
        torch.nn.functional.scaled_dot_product_attention = sdpa
        for module in patched:
            del module._attn


def _build(model_type: str, keywords: dict):
    from transformers import AutoModel
    from transformers.utils import logging

    logging.set_verbosity_error()
    config = _config(model_type, keywords)
    torch.manual_seed(0)
    try:
        model = AutoModel.from_config(config, attn_implementation="sdpa")
    except (ValueError, ImportError):
        model = AutoModel.from_config(config, attn_implementation="eager")
    return model.double().eval()


def _vectors(model, position: int, tokens: torch.Tensor, projected: list | None = None):
    """(queries, keys), each (tokens·heads, head_dim), reaching attention at ``position``;
    with ``projected``, append the output of the first attention's ``q_proj`` to it."""
    batch = tokens.shape[0]
    positions = torch.full((batch, 1), position)
    handle = None
    if projected is not None:
        q_proj = next(m.q_proj for m in model.modules() if hasattr(m, "q_proj")
                      and isinstance(m.q_proj, torch.nn.Linear))
        handle = q_proj.register_forward_hook(
            lambda module, args, output: projected.append(output.detach().clone()))
    with torch.no_grad(), _capture(model) as seen:
        try:
            model(input_ids=tokens, position_ids=positions, use_cache=False)
        except _Seen:
            pass
    if handle is not None:
        handle.remove()
    if not seen:
        raise RuntimeError(f"{type(model).__name__}: no attention call was captured")
    query, key = seen[0]
    if query.shape[1] == batch and query.shape[2] != batch and query.dim() == 4 \
            and query.shape[2] != 1:
        query, key = query.transpose(1, 2), key.transpose(1, 2)
    return (query.reshape(-1, query.shape[-1]), key.reshape(-1, key.shape[-1]))


def _solve(before: torch.Tensor, after: torch.Tensor) -> torch.Tensor:
    """``R`` with ``after[t] = R @ before[t]`` for every row ``t`` (least squares)."""
    return torch.linalg.lstsq(before, after).solution.mT


def read_rotation(rotation: torch.Tensor, tol: float) -> dict:
    """Pairs and angles of a block rotation ``R``: ``{"pairs": [[a, b, angle], ...],
    "still": [...]}``, where ``out[a] = x[a]cos − x[b]sin`` and
    ``out[b] = x[b]cos + x[a]sin`` (so ``angle = atan2(R[b, a], R[a, a])``) and the
    ``still`` features pass through. Raises ``ValueError`` if ``R`` is not of that form.
    """
    d = rotation.shape[0]
    off = rotation - torch.diag(torch.diagonal(rotation))
    pairs, still, done = [], [], set()
    for a in range(d):
        if a in done:
            continue
        partners = [b for b in range(d) if off[a, b].abs() > tol or off[b, a].abs() > tol]
        if not partners:
            if abs(rotation[a, a].item() - 1) > tol:
                raise ValueError(f"feature {a} is scaled by {rotation[a, a].item()}, not turned")
            still.append(a)
            continue
        if len(partners) != 1:
            raise ValueError(f"feature {a} mixes with {partners}: not a pairwise rotation")
        b = partners[0]
        block = rotation[[a, b]][:, [a, b]]
        cos, sin = block[0, 0].item(), block[1, 0].item()
        if abs(block[1, 1].item() - cos) > tol or abs(block[0, 1].item() + sin) > tol \
                or abs(math.hypot(cos, sin) - 1) > tol:
            raise ValueError(f"features {a}, {b}: {block.tolist()} is not a rotation")
        pairs.append([a, b, math.atan2(sin, cos)])
        done.update((a, b))
    return {"pairs": pairs, "still": still}


def _permutation(before: torch.Tensor, projected: torch.Tensor) -> torch.Tensor:
    """``P`` with ``before = projected @ P.T`` (the code reorders the features before it
    rotates them); raises ``ValueError`` unless ``P`` is a permutation."""
    perm = _solve(projected, before)
    rounded = perm.round()
    # float32 cos/sin tables at position 0 (cos 0 = 1 exactly; complex products round)
    if (perm - rounded).abs().max() > 64 * torch.finfo(torch.float32).eps or not torch.equal(
            rounded.abs().sum(0), torch.ones(perm.shape[0], dtype=perm.dtype)) \
            or not torch.equal(rounded.abs().sum(1), rounded.sum(1)):
        raise ValueError("the query reaching attention at position 0 is not a "
                         "permutation of q_proj's output")
    return rounded


def model_rotations(model_type: str, keywords: dict, positions, *,
                    tokens: int = 24) -> dict:
    """``{p: (R_query(p), R_key(p))}``: the rotations a one-layer model of
    ``model_type`` applies at each position ``p`` (see :func:`probe_model` for the
    feature order), ``(head_dim, head_dim)`` float64 each."""
    model = _build(model_type, keywords)
    generator = torch.Generator().manual_seed(1)
    ids = torch.randint(0, 256, (tokens, 1), generator=generator)
    projected: list = []
    has_q_proj = any(hasattr(m, "q_proj") and isinstance(m.q_proj, torch.nn.Linear)
                     for m in model.modules())
    has_norm = any(hasattr(m, "q_norm") or hasattr(m, "q_layernorm")
                   for m in model.modules())
    at_zero = _vectors(model, 0, ids, projected if has_q_proj and not has_norm else None)
    head_dim = at_zero[0].shape[-1]
    perm = torch.eye(head_dim, dtype=torch.float64)
    if projected and projected[0].numel() == at_zero[0].numel():
        perm = _permutation(at_zero[0], projected[0].reshape(-1, head_dim))
    out = {}
    for p in positions:
        at = _vectors(model, int(p), ids)
        # R in q_proj's order: P^T R P (P is a permutation)
        out[int(p)] = tuple(perm.T @ _solve(at_zero[i], at[i]) @ perm for i in (0, 1))
    out["reordered"] = not torch.equal(perm, torch.eye(head_dim, dtype=torch.float64))
    return out


def probe_model(model_type: str, keywords: dict, *, far: int = 37,
                tokens: int = 24) -> dict:
    """Probe one model's rotation of queries and keys (see the module docstring).

    Where the model has a plain ``q_proj`` (``nn.Linear``, one ``head_dim`` per head)
    and no norm between it and the rotation, the rotation is read in ``q_proj``'s
    feature order, the layout of the checkpoint's weights: some code reorders the
    features before rotating them (DeepSeek-V3's and Mistral 4's
    ``apply_rotary_pos_emb_interleave`` turns adjacent pairs by moving them apart and
    rotating half against half), and queries and keys go through the same function,
    so the one permutation ``P`` read from the queries at position 0 (``ValueError``
    unless it is one) maps both back. Otherwise it is read in the order that reaches
    the kernel.

    Returns a dict with ``model_type``, ``transformers`` (its version), ``head_dim``,
    ``query`` and ``key`` (each :func:`read_rotation` of ``R(1)``), ``far`` and
    ``far_error`` (the largest entry of ``R(far)`` minus the pairs of ``R(1)`` turned
    ``far`` times as far, queries and keys) and ``reordered`` (whether the code
    permutes the features before it rotates them).
    """
    import transformers

    rotations = model_rotations(model_type, keywords, (1, far), tokens=tokens)
    head_dim = rotations[1][0].shape[0]
    eps32 = torch.finfo(torch.float32).eps
    # cos and sin come from float32 tables in most models: ~ (4 + ln base) eps32 per
    # entry at position 1; the solve adds eps64 · cond
    tol = 64 * (4 + math.log(BASE)) * eps32
    out = {"model_type": model_type, "transformers": transformers.__version__,
           "head_dim": head_dim, "far": far}
    error = 0.0
    for index, name in enumerate(("query", "key")):
        reading = read_rotation(rotations[1][index], tol)
        out[name] = reading
        error = max(error, float((rotations[far][index]
                                  - rotation_matrix(reading, head_dim, far)).abs().max()))
    out["far_error"] = error
    out["reordered"] = rotations["reordered"]
    return out


def rotation_matrix(reading: dict, head_dim: int, position: float) -> torch.Tensor:
    """The ``(head_dim, head_dim)`` rotation at ``position`` of a :func:`read_rotation`
    reading (its pairs turned ``position`` times their angle)."""
    out = torch.eye(head_dim, dtype=torch.float64)
    for a, b, angle in reading["pairs"]:
        c, s = math.cos(position * angle), math.sin(position * angle)
        out[a, a], out[b, b], out[a, b], out[b, a] = c, c, -s, s
    return out


def plan_reading(head_dim: int, partial_rotary_factor: float, layout: str,
                 base: float = BASE) -> dict:
    """:func:`read_rotation`'s form of a :func:`posenc_lib.designs.rotation_plan`."""
    plan = designs.rotation_plan(head_dim, partial_rotary_factor, layout, base)
    pairs = sorted([int(a), int(b), float(t)] for a, b, t in zip(*plan) if t > 0)
    still = sorted(int(f) for a, b, t in zip(*plan) if t == 0 for f in (a, b))
    return {"pairs": pairs, "still": still}


def same_rotation(probe: dict, plan: dict, tol: float) -> bool:
    """Do a probe's reading and a plan's turn the same features, paired and oriented
    the same way, at angles within ``tol``?"""
    ours = sorted(probe["pairs"])
    if [p[:2] for p in ours] != [p[:2] for p in plan["pairs"]]:
        return False
    if sorted(probe["still"]) != plan["still"]:
        return False
    return all(abs(p[2] - q[2]) <= tol for p, q in zip(ours, plan["pairs"]))


def match_layouts(probe: dict, partial_rotary_factor: float = 0.5,
                  base: float = BASE) -> list[str]:
    """Every layout of :data:`posenc_lib.designs.LAYOUTS` whose plan is the probe's
    rotation, for queries and keys alike (angles within float32's rounding of
    ``base**x``: ``(4 + ln base)·eps32`` each)."""
    tol = 16 * (4 + math.log(base)) * torch.finfo(torch.float32).eps
    head_dim = probe["head_dim"]
    return [layout for layout in designs.LAYOUTS
            if all(same_rotation(probe[side], plan_reading(head_dim, partial_rotary_factor,
                                                           layout, base), tol)
                   for side in ("query", "key"))]


def probe_all(names=None) -> dict:
    """Probe every model of :data:`PROBES` this transformers has (or ``names``)."""
    major = _major()
    results = {}
    for name, (model_type, keywords, _, needs, *_) in PROBES.items():
        if (names is not None and name not in names) or (needs == 5 and major < 5):
            continue
        results[name] = probe_model(model_type, keywords)
    return results
