"""RoPEs written the ways real code writes them, independently of posenc_lib:
transformers' rotate_half, Meta's complex multiplication, an explicit
block-diagonal matrix, vLLM's fused cos/sin cache (NeoX and GPT-J) and an
elementwise loop, each with switches for the bugs; scaled frequencies from
transformers itself; the catalogue of planted bugs.

Shared by tests/test_diagnose_styles.py and tests/helpers/diagnose_table.py.
"""

import math

import torch
from transformers import LlamaConfig
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS

DIM = 64
BASE = 10000.0


def plain(dim=DIM, base=BASE, denominator=None):
    d = dim if denominator is None else denominator
    return 1.0 / base ** (torch.arange(0, dim, 2, dtype=torch.float32) / d)


# -- five styles: fn(x, positions) from inv_freq, with switches for the bugs -----------

def _positions(positions, x, bug):
    if bug == "offset":
        return positions + 1
    if bug == "ignored":
        return torch.arange(x.shape[1])
    return positions


def _cos_sin(angles, bug, att):
    cos, sin = angles.cos() * att, angles.sin() * att
    if bug == "swap":
        cos, sin = sin, cos
    if bug == "sign":
        sin = -sin
    return cos, sin


def hf_rotate_half(inv, bug=None, att=1.0):
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        freqs = t[:, None] * inv[None, :]
        emb = torch.cat((freqs, freqs), dim=-1)
        cos, sin = _cos_sin(emb, bug, att)
        return x * cos + rotate_half(x) * sin

    return fn


def meta_complex(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        freqs = torch.outer(t, inv)
        cos, sin = _cos_sin(freqs, bug, att)
        freqs_cis = torch.complex(cos, sin)
        xc = torch.view_as_complex(x.float().reshape(*x.shape[:-1], -1, 2))
        return torch.view_as_real(xc * freqs_cis).flatten(-2)

    return fn


def block_matrix(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        cos, sin = _cos_sin(t[:, None] * inv[None, :], bug, att)
        n = inv.shape[0]
        r = torch.zeros(t.shape[0], 2 * n, 2 * n)
        i = torch.arange(n)
        r[:, i, i] = cos
        r[:, i + n, i + n] = cos
        r[:, i, i + n] = -sin
        r[:, i + n, i] = sin
        return torch.einsum("sij,bsj->bsi", r, x)

    return fn


def vllm_cache(inv, bug=None, att=1.0, neox=True, max_len=32768 + 64):
    t = torch.arange(max_len, dtype=torch.float32)
    cos, sin = _cos_sin(torch.einsum("i,j->ij", t, inv), bug if bug != "offset"
                        else None, att)
    cache = torch.cat((cos, sin), dim=-1)

    def fn(x, positions):
        if bug == "offset":
            positions = positions + 1
        cs = cache[:x.shape[1]] if bug == "ignored" else cache.index_select(0, positions)
        c, s = cs.chunk(2, dim=-1)
        if neox:
            x1, x2 = torch.chunk(x, 2, dim=-1)
            return torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        x1, x2 = x[..., ::2], x[..., 1::2]
        return torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)

    return fn


def vllm_gptj(inv, bug=None, att=1.0):
    return vllm_cache(inv, bug, att, neox=False)


def loop(inv, bug=None, att=1.0):
    def fn(x, positions):
        t = _positions(positions, x, bug).float()
        out = x.clone()
        n = inv.shape[0]
        for i in range(n):
            c, s = _cos_sin(t * inv[i], bug, att)
            a, b = x[..., i], x[..., i + n]
            out[..., i] = a * c - b * s
            out[..., i + n] = b * c + a * s
        return out

    return fn


STYLES = {"hf_rotate_half": (hf_rotate_half, "half"),
          "meta_complex": (meta_complex, "interleaved"),
          "block_matrix": (block_matrix, "half"),
          "vllm_neox": (vllm_cache, "half"),
          "vllm_gptj": (vllm_gptj, "interleaved"),
          "loop": (loop, "half")}


# -- scaled frequencies from transformers itself ---------------------------------------

SCALINGS = {
    "linear": {"rope_type": "linear", "factor": 4.0},
    "yarn": {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048},
    "llama3": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
               "high_freq_factor": 4.0, "original_max_position_embeddings": 2048},
}


def transformers_rope(rope_scaling, base=BASE, dim=DIM, max_len=8192):
    config = LlamaConfig(hidden_size=dim, num_attention_heads=1, head_dim=dim,
                         rope_theta=base, rope_scaling=dict(rope_scaling),
                         max_position_embeddings=max_len)
    inv, att = ROPE_INIT_FUNCTIONS[rope_scaling["rope_type"]](config, "cpu")
    return inv.float(), float(att)


def yarn_ramp_inverted(rope_scaling, base=BASE, dim=DIM):
    """YaRN written by hand with the ramp's weights the wrong way round."""
    factor = rope_scaling["factor"]
    length = rope_scaling["original_max_position_embeddings"]
    pos_freqs = base ** (torch.arange(0, dim, 2, dtype=torch.float64) / dim)

    def correction(turns):
        return dim * math.log(length / (turns * 2 * math.pi)) / (2 * math.log(base))

    low = max(math.floor(correction(32)), 0)
    high = min(math.ceil(correction(1)), dim - 1)
    ramp = ((torch.arange(dim // 2, dtype=torch.float64) - low) / (high - low)).clamp(0, 1)
    extrapolation = 1 - ramp
    inverted = 1 - extrapolation
    inv = (1 / (factor * pos_freqs)) * (1 - inverted) + (1 / pos_freqs) * inverted
    return inv.float()


BUGS = [
    # (name, inv_freq, bug switch, code, words the explanation must hold)
    ("integer division", 1.0 / BASE ** (torch.arange(0, DIM, 2) // DIM), None,
     "frequency-exponent", "integer division"),
    ("rising ladder", BASE ** (torch.arange(0, DIM, 2).float() / DIM), None,
     "frequency-exponent", "rise"),
    ("reversed ladder", plain().flip(0), None, "frequency-reversed", "flip"),
    ("hidden_size in the exponent", plain(denominator=4096), None,
     "frequency-exponent", "4096"),
    ("wrong base", plain(base=5e5), None, "base", "500000"),
    ("cos/sin swapped", plain(), "swap", "cos-sin-swapped", "swapped"),
    ("positions + 1", plain(), "offset", "position-offset", "p + 1"),
    ("positions ignored", plain(), "ignored", "positions-ignored", "KV cache"),
    ("rotation reversed", plain(), "sign", "rotation-reversed", "backwards"),
]
