"""Run a multimodal-RoPE model type's own rotary code on one-hot probes.

Shared by ``tests/test_mrope_population.py`` (the installed transformers, live)
and ``scripts/mrope_population.py`` (any transformers, stored in
``results/mrope-<major>.json``). Nothing here reads the inspector's tables:
what a module does is observed, and the inspector's report is read back into
the same form (:func:`reported`) so that the two can be compared.

The population is read from transformers, not listed: every
``transformers.models.<name>.modeling_<name>`` whose source mentions
``mrope_section`` (:func:`mrope_modules`). ``SPECS`` says, per module, how to
build its language model's rotary module: the class, the config types, where
the text fields sit, and the sections its released checkpoints use.
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import inspect
import math
from pathlib import Path

import torch

HEAD_DIM = 128

#: module: how to probe it. ``rotary``: the language model's rotary classes
#: (the first one the module defines is used); ``top``/``text``: the composite
#: and the text config types; ``nest``: where the text fields sit in the
#: composite; ``sections``: the released checkpoints' ``mrope_section`` (or the
#: code's default where no checkpoint is public here); ``partial``: the
#: rotary fraction of the head that the sections cover; ``head_dim``;
#: ``axes``: the rows of ``position_ids``, in the order ``get_rope_index``
#: stacks them (``torch.stack([T_grid, H_grid, W_grid])`` in every module but
#: HunYuan-VL, whose docstring names the last three rows width, height, image
#: index, and NeoMME, whose two rows are the grid's row and column);
#: ``layer_types``: a per-layer-type ``rope_parameters`` (the key probed).
SPECS = {
    "qwen2_vl": dict(rotary=["Qwen2VLRotaryEmbedding"], top="qwen2_vl",
                     text="qwen2_vl_text", sections=[16, 24, 24]),
    "qwen2_5_vl": dict(rotary=["Qwen2_5_VLRotaryEmbedding"], top="qwen2_5_vl",
                       text="qwen2_5_vl_text", sections=[16, 24, 24]),
    "qwen3_vl": dict(rotary=["Qwen3VLTextRotaryEmbedding"], top="qwen3_vl",
                     text="qwen3_vl_text", sections=[24, 20, 20]),
    "qwen3_vl_moe": dict(rotary=["Qwen3VLMoeTextRotaryEmbedding"], top="qwen3_vl_moe",
                         text="qwen3_vl_moe_text", sections=[24, 20, 20]),
    "glm4v": dict(rotary=["Glm4vTextRotaryEmbedding"], top="glm4v", text="glm4v_text",
                  sections=[8, 12, 12], partial=0.5),
    "glm4v_moe": dict(rotary=["Glm4vMoeTextRotaryEmbedding"], top="glm4v_moe",
                      text="glm4v_moe_text", sections=[8, 12, 12], partial=0.5),
    "glm_image": dict(rotary=["GlmImageTextRotaryEmbedding"], top="glm_image",
                      text="glm_image_text", sections=[8, 12, 12], partial=0.5),
    "glm_ocr": dict(rotary=["GlmOcrTextRotaryEmbedding"], top="glm_ocr",
                    text="glm_ocr_text", sections=[8, 12, 12], partial=0.5),
    "paddleocr_vl": dict(rotary=["PaddleOCRRotaryEmbedding"], top="paddleocr_vl",
                         text="paddleocr_vl_text", sections=[16, 24, 24]),
    "ernie4_5_vl_moe": dict(rotary=["Ernie4_5_VLMoeTextRotaryEmbedding"],
                            top="ernie4_5_vl_moe", text="ernie4_5_vl_moe_text",
                            sections=[22, 22, 20]),
    "hunyuan_vl": dict(rotary=["HunYuanVLRotaryEmbedding"], top="hunyuan_vl",
                       text="hunyuan_vl_text", sections=[16, 16, 16, 16],
                       axes=["sequence", "width", "height", "image"]),
    "hy_v4_vl": dict(rotary=["HYV4VLRotaryEmbedding"], top="hy_v4_vl",
                     text="hy_v4_vl_text", sections=[12, 10, 10], head_dim=64,
                     extra={"qk_rope_head_dim": 64}),
    "cosmos3_edge": dict(rotary=["Cosmos3EdgeTextRotaryEmbedding"], top="cosmos3_edge",
                         text="cosmos3_edge_text", sections=[24, 20, 20]),
    "cohere_compass": dict(rotary=["CohereCompassRotaryEmbedding"], top="cohere_compass",
                           text="cohere_compass_text", sections=[24, 20, 20],
                           layer_types="full_attention"),
    "qwen3_5": dict(rotary=["Qwen3_5TextRotaryEmbedding"], top="qwen3_5",
                    text="qwen3_5_text", sections=[11, 11, 10], partial=0.25,
                    head_dim=256),
    "qwen3_5_moe": dict(rotary=["Qwen3_5MoeTextRotaryEmbedding"], top="qwen3_5_moe",
                        text="qwen3_5_moe_text", sections=[11, 11, 10], partial=0.25,
                        head_dim=256),
    "qwen4_exp": dict(rotary=["Qwen4ExpTextRotaryEmbedding"], top="qwen4_exp",
                      text="qwen4_exp_text", sections=[11, 11, 10], partial=0.25,
                      head_dim=256),
    "neomme": dict(rotary=["NeoMMERotaryEmbedding"], top="neomme", text=None,
                   sections=None, axes=["row", "column"], layer_types="full_attention",
                   head_dim=64),
    "qwen2_5_omni": dict(rotary=["Qwen2_5OmniRotaryEmbedding"], top="qwen2_5_omni",
                         text="qwen2_5_omni_text", sections=[16, 24, 24],
                         nest=["thinker_config", "text_config"]),
    "qwen3_omni_moe": dict(rotary=["Qwen3OmniMoeThinkerTextRotaryEmbedding"],
                           top="qwen3_omni_moe", text="qwen3_omni_moe_text",
                           sections=[24, 20, 20], nest=["thinker_config", "text_config"]),
}
THW = ["temporal", "height", "width"]

#: How the sections of a case are chosen: the checkpoints', none (the code's
#: default applies), or the checkpoints' reversed (an order no checkpoint uses,
#: to see whether a rule holds beyond the sections it was written for).
VARIANTS = ("checkpoint", "absent", "reversed")
FLAGS = (True, False, None)


def mrope_modules() -> list[str]:
    """Every ``transformers.models`` module whose modeling file mentions
    ``mrope_section``, sorted."""
    spec = importlib.util.find_spec("transformers")  # read, not imported
    models = Path(spec.origin).parent / "models"
    return sorted(path.parent.name for path in models.glob("*/modeling_*.py")
                  if path.name == f"modeling_{path.parent.name}.py"
                  and b"mrope_section" in path.read_bytes())


def case_config(module: str, flag, variant: str = "checkpoint",
                form: str = "rope_scaling") -> dict:
    """A ``config.json`` as a practitioner brings it: the composite config with
    the language model's fields where the type keeps them. ``form``:
    ``rope_scaling`` (with ``rope_theta`` beside it, as 4.x writes it),
    ``rope_parameters`` (5.x), or ``text_only``: the language model's own
    mapping taken out of a nested composite (``rope_scaling`` form)."""
    if form == "text_only":
        inner = case_config(module, flag, variant)
        for key in SPECS[module].get("nest", ["text_config"]):
            inner = inner[key]
        return inner
    spec = SPECS[module]
    head = spec.get("head_dim", HEAD_DIM)
    block: dict = {"rope_type": "default"}
    sections = spec["sections"]
    if sections is not None and variant == "checkpoint":
        block["mrope_section"] = list(sections)
    elif sections is not None and variant == "reversed":
        block["mrope_section"] = list(reversed(sections))
    if spec.get("partial", 1.0) != 1.0:
        block["partial_rotary_factor"] = spec["partial"]
    if flag is not None:
        block["mrope_interleaved"] = flag
    text = {"hidden_size": 512, "num_attention_heads": 4, "num_key_value_heads": 4,
            "head_dim": head, "max_position_embeddings": 4096, **spec.get("extra", {})}
    if form == "rope_parameters":
        block["rope_theta"] = 1e4
    else:
        text["rope_theta"] = 1e4
        if "partial_rotary_factor" in block:
            text["partial_rotary_factor"] = block.pop("partial_rotary_factor")
    if spec.get("layer_types"):
        text["layer_types"] = [spec["layer_types"]] * 2
        text["num_hidden_layers"] = 2
        block = {spec["layer_types"]: {**block, "rope_theta": 1e4}}
        text.pop("rope_theta", None)
        form = "rope_parameters"
    text[form] = block
    if spec["text"] is None:
        return {"model_type": spec["top"], **text}
    text["model_type"] = spec["text"]
    nest = spec.get("nest", ["text_config"])
    config: dict = {"model_type": spec["top"]}
    inner = config
    for key in nest[:-1]:
        inner[key] = {}
        inner = inner[key]
    inner[nest[-1]] = text
    return config


def _text_object(module: str, config: dict):
    """transformers' config object for the language model of ``config``."""
    from transformers import AutoConfig

    spec = SPECS[module]
    if spec["text"] is None:
        fields = {k: v for k, v in config.items() if k != "model_type"}
        return AutoConfig.for_model(spec["top"], **copy.deepcopy(fields))
    nest = spec.get("nest", ["text_config"])
    top = {k: v for k, v in config.items() if k != "model_type"}
    built = AutoConfig.for_model(spec["top"], **copy.deepcopy(top))
    for key in nest:
        built = getattr(built, key)
    return built


def observe(module: str, config: dict) -> dict:
    """The pair layout, each pair's position row and its angle at position 1,
    from transformers' own code for ``config`` (a :func:`case_config`).

    Head ``j`` of the probe holds the unit vector ``e_j``; with position 1 on
    one row of ``position_ids`` and 0 on the others, ``e_j`` moves iff its pair
    follows that row, and it moves into its partner feature. Pairs are numbered
    by their first feature, which is the frequency index in both layouts.
    Returns ``{"error": ...}`` where transformers' code refuses the config."""
    spec = SPECS[module]
    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    try:
        text = _text_object(module, config)
        cls = next(getattr(mod, c) for c in spec["rotary"] if hasattr(mod, c))
        rotary = cls(text)
        rows = len(spec.get("axes") or THW)
        kwargs = ({"layer_type": spec["layer_types"]} if spec.get("layer_types")
                  else {})
        head = spec.get("head_dim", HEAD_DIM)
        multimodal = getattr(mod, "apply_multimodal_rotary_pos_emb", None)
        probe = torch.eye(head, dtype=torch.float64).reshape(1, head, 1, head)
        partners: dict = {}
        axes: dict = {}
        angles: dict = {}
        for axis in range(rows):
            ids = torch.zeros(rows, 1, 1, dtype=torch.long)
            ids[axis] = 1
            cos, sin = rotary(torch.zeros(1, dtype=torch.float64), ids, **kwargs)
            cos, sin = cos.double(), sin.double()
            if multimodal is not None:
                block = getattr(text, "rope_parameters", None) or text.rope_scaling
                out, _ = multimodal(probe, probe, cos, sin, block["mrope_section"])
            else:
                out, _ = mod.apply_rotary_pos_emb(probe, probe, cos, sin)
            out = out[0, :, 0, :]  # row j: where e_j went
            off = out.clone()
            off.fill_diagonal_(0)
            hits: dict = {}
            for j, i in torch.nonzero(off).tolist():
                hits.setdefault(j, []).append(i)
            for j, moved in sorted(hits.items()):
                if moved:
                    if len(moved) != 1 or j in axes:
                        return {"error": f"feature {j} moves into {moved} on row "
                                         f"{axis} (rows so far {axes})"}
                    partners[j], axes[j] = moved[0], axis
                    angles[j] = math.atan2(abs(float(out[j, moved[0]])),
                                           float(out[j, j]))
    except Exception as error:  # noqa: BLE001 - transformers refuses the config
        return {"error": f"{type(error).__name__}: {error}"[:300]}
    for j, p in partners.items():
        if partners.get(p) != j or axes[p] != axes[j]:
            return {"unrotated": f"feature {j} moves into {p} on row {axes[j]}, but {p} "
                                 f"moves into {partners.get(p)} on row {axes.get(p)}: "
                                 "a pair's two features follow different rows"}
    firsts = sorted(j for j in partners if j < partners[j])
    layout = ("interleaved" if all(partners[j] == j + 1 for j in firsts) else
              "half" if all(partners[j] == j + len(firsts) for j in firsts) else "other")
    return {"layout": layout, "rows": rows, "axes": [axes[j] for j in firsts],
            "angles": [angles[j] for j in firsts]}


def reported(report: dict) -> list:
    """The inspector's report as one position row per rotary pair."""
    axes = [None] * report["pairs"]
    for a, info in enumerate(report["mrope"].values()):
        for first, last in info["ranges"]:
            axes[first:last + 1] = [a] * (last - first + 1)
    return axes


def inspector_reading(config: dict) -> dict:
    """What the current inspector says of ``config``: its pair layout, one row
    per pair, the rows' names, the inverse frequencies and its M-RoPE warnings,
    or ``{"refused": message}``."""
    import warnings

    from posenc_lib.tools import inspector

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            # the M-RoPE part does not depend on the length; a short one keeps
            # the serving numbers (angle errors at every position) cheap
            report = inspector.inspect_config(config, target_length=16)
    except ValueError as error:
        return {"refused": str(error)}
    if not report.get("mrope"):
        return {"pair_layout": report.get("pair_layout"), "axes": None,
                "refused": report.get("mrope_refused")}
    base, dim = report["base"], report["rotary_dim"]
    return {"pair_layout": report["pair_layout"], "axes": reported(report),
            "names": list(report["mrope"]),
            "inv_freq": [base ** (-2 * i / dim) for i in range(dim // 2)],
            "warnings": [w for w in report["warnings"] if "M-RoPE" in w]}


#: Relative tolerance on a pair's angle at position 1: transformers computes
#: ``inv_freq = base ** (-2i/d)`` in float32 (a relative error of a few units
#: of 2**-24 times ``|ln inv_freq|`` <= 25 for bases up to 1e8 and d <= 256,
#: about 2e-6), then cos and sin in float32 (sin of a small angle keeps its
#: relative precision). 1e-4 is far above that and far below the ratio of two
#: neighbouring frequencies (``base ** (2/d)`` - 1 >= 0.07 for base >= 1e4,
#: d <= 256), so a pair given its neighbour's frequency fails.
ANGLE_RTOL = 1e-4


def judge(observed: dict, reading: dict, axis_names: list[str]) -> str | None:
    """``None`` when the inspector's reading is what the code does (or the
    inspector refuses, with a message, a config the code refuses or one it
    cannot describe), else what differs."""
    if "error" in observed or "unrotated" in observed:
        if reading.get("refused"):
            return None
        what = observed.get("error") or observed["unrotated"]
        return f"transformers' code fails or does not rotate ({what}), the inspector reports it"
    if reading.get("refused"):
        return None
    if reading.get("axes") is None:
        return "the inspector reports no M-RoPE; the model's code rotates by rows"
    problems = []
    if reading["pair_layout"] != observed["layout"]:
        problems.append(f"pairs {reading['pair_layout']} vs {observed['layout']}")
    if reading["axes"] != observed["axes"]:
        problems.append(f"rows {reading['axes']} vs {observed['axes']}")
    if reading["names"] != axis_names[:len(reading["names"])] or \
            len(reading["names"]) != observed["rows"]:
        problems.append(f"row names {reading['names']} vs {axis_names}")
    freqs = reading["inv_freq"]
    if len(freqs) != len(observed["angles"]) or any(
            abs(a - f) > ANGLE_RTOL * f for a, f in zip(observed["angles"], freqs)):
        problems.append("frequencies differ from base ** (-2i/d)")
    return "; ".join(problems) or None


# -- position ids: posenc_lib.multidim.mrope_position_ids against get_rope_index --

_TEXT_TOKEN = 1000  # any id that is neither a vision token nor vision_start

#: Prompts (``mrope_position_ids`` segments), each with a video whose grids
#: outnumber its merged rows and columns or not.
PROMPTS = {
    "text + image": [("text", 4), ("image", (1, 6, 8)), ("text", 5)],
    "text + video, 4 grids of 2 x 3": [("text", 3), ("video", (4, 4, 6)), ("text", 2)],
    "image and video": [("text", 5), ("image", (1, 8, 6)), ("text", 2),
                        ("video", (6, 4, 4)), ("text", 3), ("image", (1, 2, 2)),
                        ("text", 2)],
    "video of 2 grids of 5 x 1, image": [("text", 2), ("video", (2, 10, 2)), ("text", 1),
                                         ("image", (1, 16, 4))],
}


def rope_index(module: str, segments, *, seconds=None, tokens_per_second=None):
    """transformers' ``get_rope_index`` of ``module`` (qwen2_vl, qwen2_5_vl or
    qwen3_vl) for a prompt laid out as its processor lays it out (merge size
    2), through the 4.x or the 5.x signature: a ``(3, seq)`` tensor."""
    import functools
    import types

    from transformers import AutoConfig

    mod = importlib.import_module(f"transformers.models.{module}.modeling_{module}")
    model = next(getattr(mod, n) for n in dir(mod)
                 if n.endswith("Model") and hasattr(getattr(mod, n), "get_rope_index")
                 and "ForConditional" not in n)
    vision = {"spatial_merge_size": 2}
    if tokens_per_second is not None:
        vision["tokens_per_second"] = tokens_per_second
    config = AutoConfig.for_model(module, vision_config=vision)
    tokens, kinds, images, videos = [], [], [], []
    for kind, size in segments:
        if kind == "text":
            tokens += [_TEXT_TOKEN + n for n in range(size)]
            kinds += [0] * size
            continue
        tokens[-1] = config.vision_start_token_id  # every block follows vision_start
        token = config.image_token_id if kind == "image" else config.video_token_id
        n = size[0] * (size[1] // 2) * (size[2] // 2)
        tokens += [token] * n
        kinds += [1 if kind == "image" else 2] * n
        (images if kind == "image" else videos).append(list(size))
    if module == "qwen3_vl" and videos:  # the processor reports each video whole
        videos = [[sum(v[0] for v in videos), *videos[0][1:]]]
    this = types.SimpleNamespace(config=config)
    if hasattr(model, "get_vision_position_ids"):
        this.get_vision_position_ids = functools.partial(model.get_vision_position_ids, this)
    kwargs = {"image_grid_thw": torch.tensor(images) if images else None,
              "video_grid_thw": torch.tensor(videos) if videos else None}
    if seconds is not None:  # the processor's list of floats, as a "pt" tensor
        kwargs["second_per_grid_ts"] = torch.tensor([seconds] * len(videos))
    ids = torch.tensor([tokens])
    if "mm_token_type_ids" in inspect.signature(model.get_rope_index).parameters:
        kwargs["mm_token_type_ids"] = torch.tensor([kinds])
    return model.get_rope_index(this, ids, **kwargs)[0][:, 0]


def position_ids_report() -> dict:
    """Where ``mrope_position_ids`` and the running transformers'
    ``get_rope_index`` agree: each of ``PROMPTS`` for Qwen2-VL, Qwen2.5-VL (one
    second per grid, 2 ids per second) and Qwen3-VL (one segment per frame),
    and Qwen2.5-VL's absolute time over a sweep: 64 grids of one token, frame
    rates n and n * 1000/1001 (n = 1..64), ``tokens_per_second`` 1, 2, 4 and 25,
    ``second_per_grid_ts = 2 / fps`` as the processor passes it. Each temporal
    offset is also compared with the exact ``floor(t * 2/fps * r)``."""
    from fractions import Fraction

    from posenc_lib import multidim

    prompts = {}
    for name, segments in PROMPTS.items():
        per_frame = []
        for kind, size in segments:
            if kind == "video":
                per_frame += [("video", (1, *size[1:])), ("text", 1)] * size[0]
            else:
                per_frame.append((kind, size))
        for module, segs, kwargs in (
                ("qwen2_vl", segments, {}),
                ("qwen2_5_vl", segments, {"seconds": 1.0, "tokens_per_second": 2}),
                ("qwen3_vl", per_frame, {})):
            ours = multidim.mrope_position_ids(
                segs, seconds_per_grid=kwargs.get("seconds"),
                tokens_per_second=kwargs.get("tokens_per_second"))
            theirs = rope_index(module, segs, **kwargs)
            differ = (ours != theirs).any(0).nonzero().flatten().tolist()
            prompts[f"{module}: {name}"] = {
                "module": module, "segments": [[k, v] for k, v in segs],
                "tokens": ours.shape[1], "differing_tokens": len(differ),
                "first": None if not differ else {
                    "token": differ[0], "library": ours[:, differ[0]].tolist(),
                    "transformers": theirs[:, differ[0]].tolist()}}
    grids, rates = 64, [Fraction(n) for n in range(1, 65)] + [
        Fraction(1000 * n, 1001) for n in range(1, 65)]
    offsets = library_off = transformers_off = 0
    examples = []
    for fps in rates:
        for r in (1, 2, 4, 25):
            segs = [("text", 1), ("video", (grids, 2, 2))]
            seconds = 2 / float(fps)
            exact = [int(t * 2 / fps * r) for t in range(grids)]
            ours = (multidim.mrope_position_ids(segs, seconds_per_grid=seconds,
                                                tokens_per_second=r)[0, 1:] - 1).tolist()
            theirs = (rope_index("qwen2_5_vl", segs, seconds=seconds,
                                 tokens_per_second=r)[0, 1:] - 1).tolist()
            offsets += grids
            library_off += sum(a != b for a, b in zip(ours, exact))
            bad = [t for t in range(grids) if theirs[t] != exact[t]]
            transformers_off += len(bad)
            if bad and len(examples) < 5:
                t = bad[0]
                examples.append({"fps": str(fps), "tokens_per_second": r, "grid": t,
                                 "exact": exact[t], "transformers": theirs[t]})
    return {"prompts": prompts, "absolute_time": {
        "offsets": offsets, "library_differs_from_exact": library_off,
        "transformers_differs_from_exact": transformers_off, "examples": examples}}
