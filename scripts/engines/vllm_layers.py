"""vLLM 0.33.0's own model classes, built from a tiny config of every causal-LM
and multimodal type it serves and transformers registers: the KV-cache spec of
each layer.

For each architecture in vLLM's ``ModelRegistry`` that is also the causal-LM,
image-text-to-text or multimodal-LM class of a transformers model type, the
type's tiny default text config (the window-keys sweep's,
:func:`scripts.window_keys.written_forms`: the config written out, then each
window form's keys added, as a practitioner edits a ``config.json``) gets that
architecture and is written to a directory; a composite type's default config
holds that text config in its text key, as a published multimodal
``config.json`` does. vLLM then does what ``vllm serve`` does up to the
weights: ``EngineArgs(model=dir).create_engine_config()`` (its ``ModelConfig``
reads the file with transformers, its ``CacheConfig`` takes the model-level
window), and ``initialize_model`` builds the model on the meta device. Each
layer's ``get_kv_cache_spec`` is stored: its class (full, sliding window,
chunked local, MLA, Mamba, ...), window or chunk, KV heads, head sizes, bytes
per block, and ``max_memory_usage_bytes`` at the engine's ``max_model_len``;
for the config as it is, also each layer's cache dtype under
``--kv-cache-dtype fp8`` on a bfloat16 model.
``tests/test_vllm_layers.py`` compares ``posenc_lib.serving`` with vLLM on
every stored form.

vLLM is not installed (its wheel pulls CUDA packages): its Python files are
extracted from the wheel, sha256-checked, and imported on vLLM's CPU platform
(``VLLM_TARGET_DEVICE=cpu``) in a venv of its own with torch 2.14.1 and
torchvision 0.29.1 (vLLM asks for 2.14.0 and 0.29.0; the multimodal model
files import torchvision), transformers 5.20.2, the newest vLLM 0.33.0 accepts
(``transformers<5.21``), and vLLM's pure-Python dependencies in a ``--target``
directory. ``make vllm-layers`` does the set-up and runs this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "scripts"))
os.environ.setdefault("VLLM_TARGET_DEVICE", "cpu")

#: vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl (PyPI), as in
#: posenc_lib/_vendor/vllm/vendor.txt.
SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"


#: transformers' auto mappings whose classes a practitioner's config.json
#: names in ``architectures``: causal LMs first (a class in several mappings
#: keeps the first model type), then the multimodal ones that generate text.
MAPPINGS = ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES",
            "MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES",
            "MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES")
#: Where a composite config keeps its language model's config (as
#: ``posenc_lib.tools.tiny_model`` looks for it).
TEXT_KEYS = ("text_config", "text_model_config", "language_config")


def architectures() -> dict[str, str]:
    """``{architecture: model_type}``: vLLM's registered architectures that
    are a transformers model type's causal-LM, image-text-to-text or
    multimodal-LM class."""
    from transformers.models.auto import modeling_auto
    from vllm.model_executor.models.registry import ModelRegistry

    by_class: dict[str, str] = {}
    for mapping in MAPPINGS:
        for model_type, name in getattr(modeling_auto, mapping).items():
            for one in (name if isinstance(name, tuple) else (name,)):
                by_class.setdefault(one, model_type)
    return {a: by_class[a] for a in sorted(ModelRegistry.get_supported_archs())
            if a in by_class}


def _clean(config) -> dict:
    out = json.loads(json.dumps(config.to_dict(), default=str))
    for key in ("transformers_version", "_attn_implementation", "dtype", "torch_dtype"):
        out.pop(key, None)
    return out


def written(model_type: str, wrap: bool = True) -> list[tuple[str, dict]]:
    """``[(form, raw config.json)]``: the window-keys sweep's tiny text config
    of ``model_type`` with each form's keys added; for a composite type (and
    ``wrap``), its default config with that text config in its text key, where
    a practitioner's multimodal config.json keeps it, and a default vision
    config where the class leaves none (Gemma 4: published configs carry one).
    Where transformers cannot build a causal LM of the text config class, the
    text config alone."""
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING
    from window_keys import forms, written_forms

    from posenc_lib.tools import tiny_model

    try:
        _, texts = written_forms(model_type)
    except Exception:  # noqa: BLE001 -- no causal LM of the class: its config
        cls, kw = tiny_model.shrunk(model_type)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            base = cls(**kw)
        texts = [(name, {**_clean(base), **extra}) for name, extra in
                 forms(getattr(base, "num_hidden_layers", None)).items()]
    kwargs = tiny_model.DEFAULT_KWARGS.get(model_type, {})
    outer = CONFIG_MAPPING[model_type](**kwargs)
    key = next((k for k in TEXT_KEYS if hasattr(getattr(outer, k, None), "model_type")),
               None)
    if key is None or not wrap:
        return texts
    if hasattr(outer, "vision_config") and outer.vision_config is None:
        outer = CONFIG_MAPPING[model_type](**{**kwargs, "vision_config": {}})
    outer = _clean(outer)
    return [(name, {**outer, key: text}) for name, text in texts]


def _processor_files(d: str, model_type: str) -> None:
    """The default image processor or feature extractor of ``model_type``
    saved in ``d``, for classes whose vLLM processing info loads one when the
    engine config is made (Emu3, HunYuan-VL, VibeVoice; each then stops on
    what it loads next, a tokenizer or its own processor code)."""
    import transformers
    from transformers.models.auto.feature_extraction_auto import (
        FEATURE_EXTRACTOR_MAPPING_NAMES)
    from transformers.models.auto.image_processing_auto import (
        IMAGE_PROCESSOR_MAPPING_NAMES)

    names = IMAGE_PROCESSOR_MAPPING_NAMES.get(model_type)
    if isinstance(names, dict):
        names = names.get("pil") or next(iter(names.values()))
    for name in (names, FEATURE_EXTRACTOR_MAPPING_NAMES.get(model_type)):
        if isinstance(name, str) and hasattr(transformers, name):
            getattr(transformers, name)().save_pretrained(d)


def _spec(spec, vllm_config) -> dict:
    out = {"spec": type(spec).__name__}
    for field in ("sliding_window", "attention_chunk_size", "num_kv_heads",
                  "head_size", "head_size_v", "block_size"):
        value = getattr(spec, field, None)
        if value is not None:
            out[field] = value
    dtype = getattr(spec, "dtype", None)
    if dtype is not None:
        out["dtype"] = str(dtype).removeprefix("torch.")
    for field in ("page_size_bytes",):
        out[field] = getattr(spec, field)
    out["max_memory_usage_bytes"] = spec.max_memory_usage_bytes(vllm_config)
    return out


class _Unbuilt:
    """Stands for one of vLLM's compiled ops (``torch.ops._C.*``), which the
    wheel's Python files reference at construction (``NewGELU``, ...): the
    layers are built, never run."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{self.name}: vLLM's compiled op is not built here")


#: The compiled activations vLLM's activation layers look up when built
#: (``self.op = torch.ops._C.<name>`` in ``model_executor/layers/activation.py``).
COMPILED_ACTIVATIONS = (
    "activation_lut_bf16", "fatrelu_and_mul", "gelu_and_mul", "gelu_fast", "gelu_new",
    "gelu_quick", "gelu_tanh", "gelu_tanh_and_mul", "mul_and_silu", "relu2_no_mul",
    "relu_squared", "silu_and_mul", "silu_and_mul_with_clamp", "situ_and_mul")


def _stub_compiled_ops() -> None:
    """``torch.ops._C.<op>`` for :data:`COMPILED_ACTIVATIONS` resolves to
    :class:`_Unbuilt` where the op is missing, instead of failing the model's
    construction on a CPU without vLLM's compiled library (any other missing
    op still raises, so ``hasattr`` checks keep their answer)."""
    import torch._ops

    original = torch._ops._OpNamespace.__getattr__

    def getattr_(self, name):
        try:
            return original(self, name)
        except AttributeError:
            if self.name == "_C" and name in COMPILED_ACTIVATIONS:
                return _Unbuilt(f"torch.ops._C.{name}")
            raise

    torch._ops._OpNamespace.__getattr__ = getattr_


def layers_of(raw: dict, processor: bool = False, **engine_args) -> dict:
    """vLLM's engine config and model for ``raw`` (with the type's default
    processor files if ``processor``): ``{"max_model_len",
    "cache_sliding_window", "layers": [(name, spec)], "language_model"}``;
    raises what vLLM raises."""
    import torch
    from vllm.config import get_layers_from_vllm_config, set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers.attention.attention import Attention
    from vllm.model_executor.layers.attention_layer_base import AttentionLayerBase
    from vllm.model_executor.model_loader.utils import initialize_model

    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_text(json.dumps(raw))
        if processor:
            _processor_files(d, raw.get("model_type", ""))
        engine_args = {"dtype": "float32", **engine_args}
        args = EngineArgs(model=d, skip_tokenizer_init=True, load_format="dummy",
                          enforce_eager=True, **engine_args)
        vllm_config = args.create_engine_config()
        try:
            with set_current_vllm_config(vllm_config), torch.device("meta"):
                model = initialize_model(vllm_config=vllm_config)
            device = "meta"
        except NotImplementedError as error:  # a layer that copies values at
            if "meta tensor" not in str(error):  # construction (ALiBi slopes)
                raise
            vllm_config = args.create_engine_config()
            with set_current_vllm_config(vllm_config), torch.device("cpu"):
                model = initialize_model(vllm_config=vllm_config)
            device = "cpu"
        # the model runner's own enumeration (GPUModelRunner.get_kv_cache_spec,
        # vllm/v1/worker/gpu_model_runner.py): every attention-like layer the
        # model registered, a layer reading another's cache skipped
        layers, shared = [], {}
        found = get_layers_from_vllm_config(vllm_config, AttentionLayerBase)
        for name, module in found.items():
            target = getattr(module, "kv_sharing_target_layer_name", None)
            if isinstance(module, Attention) and target:
                shared[name] = target
                continue
            spec = module.get_kv_cache_spec(vllm_config)
            if spec is not None:
                layers.append([name, _spec(spec, vllm_config)])
        text = vllm_config.model_config.hf_text_config
        inner = getattr(model, "language_model", None)
        return {"device": device, "model_class": type(model).__name__,
                "language_model": None if inner is None else type(inner).__name__,
                "hf_layer_types": getattr(text, "layer_types", None),
                "hf_sliding_window": getattr(text, "sliding_window", None),
                "max_model_len": vllm_config.model_config.max_model_len,
                "max_in_flight_tokens": vllm_config.max_in_flight_tokens,
                "cache_sliding_window": vllm_config.cache_config.sliding_window,
                "layers": layers, "shared_kv": shared}


def measure(arch: str, model_type: str) -> dict:
    """Each window form of ``model_type`` under ``arch``: ``{"raw", ...}``
    with :func:`layers_of`'s figures or ``"refused"``."""
    out, processor = {}, False
    # a causal-LM class reads a text config (Llama4ForCausalLM, Gemma4ForCausalLM)
    for name, raw in written(model_type, wrap=not arch.endswith("ForCausalLM")):
        raw = {**raw, "architectures": [arch]}
        entry = {"raw": raw}
        try:
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    entry.update(layers_of(raw, processor))
            except OSError as error:  # the class's processing info loads one
                if processor or not re.search("Can't load (image processor|feature "
                                              "extractor)", str(error)):
                    raise
                processor = True
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    entry.update(layers_of(raw, processor))
            if name == "as-is":  # --kv-cache-dtype fp8 on a bfloat16 model
                try:
                    with warnings.catch_warnings():
                        warnings.simplefilter("ignore")
                        fp8 = layers_of(raw, processor, dtype="bfloat16",
                                        kv_cache_dtype="fp8")
                    entry["fp8_dtypes"] = [s.get("dtype") for _, s in fp8["layers"]]
                except Exception as error:  # noqa: BLE001 -- stored (MLA on a CPU)
                    entry["fp8_refused"] = f"{type(error).__name__}: {str(error)[:200]}"
        except Exception as error:  # noqa: BLE001 -- vLLM's own refusal, stored
            entry["refused"] = f"{type(error).__name__}: {str(error)[:300]}"
        out[name] = entry
    return out


def _distributed() -> None:
    """vLLM's single-process groups (gloo), once."""
    from vllm.config import VllmConfig, set_current_vllm_config
    from vllm.distributed.parallel_state import (
        init_distributed_environment,
        initialize_model_parallel,
    )

    d = tempfile.mkdtemp()
    with set_current_vllm_config(VllmConfig()):
        init_distributed_environment(world_size=1, rank=0, local_rank=0,
                                     distributed_init_method=f"file://{d}/init",
                                     backend="gloo")
        initialize_model_parallel(1, 1)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--wheel", type=Path, required=True,
                        help="the vllm 0.33.0 wheel its Python files came from")
    parser.add_argument("--types", default=None, help="comma-separated model types")
    parser.add_argument("--shard", default="1/1",
                        help="i/n: every n-th architecture from the i-th (merge with --merge)")
    parser.add_argument("--merge", type=Path, nargs="*", default=None,
                        help="write --out from these shards' outputs instead")
    args = parser.parse_args(argv)
    if args.merge:
        parts = [json.loads(p.read_text()) for p in args.merge]
        out = {**parts[0], "seconds": max(p["seconds"] for p in parts),
               "architectures": {a: e for p in parts for a, e in p["architectures"].items()}}
        args.out.write_text(json.dumps(out, sort_keys=True, default=str) + "\n")
        return 0
    digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"--wheel: sha256 {digest} is not vllm 0.33.0's {SHA256}")
    import torch
    import transformers
    import vllm
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    _stub_compiled_ops()
    _distributed()
    archs = architectures()
    if args.types:
        archs = {a: t for a, t in archs.items() if t in args.types.split(",")}
    i, n = (int(x) for x in args.shard.split("/"))
    archs = dict(list(archs.items())[i - 1::n])
    start, found = time.perf_counter(), {}
    for i, (arch, model_type) in enumerate(archs.items(), 1):
        try:
            found[arch] = {"model_type": model_type, "forms": measure(arch, model_type)}
        except Exception as error:  # noqa: BLE001 -- listed, never dropped
            found[arch] = {"model_type": model_type,
                           "error": f"{type(error).__name__}: {str(error)[:300]}"}
        print(f"[{i}/{len(archs)}] {arch}", file=sys.stderr, flush=True)
    out = {"vllm": vllm.__version__, "wheel_sha256": digest,
           "transformers": transformers.__version__, "torch": torch.__version__,
           "seconds": round(time.perf_counter() - start, 1),
           "command": f"make vllm-layers (scripts/engines/vllm_layers.py --out "
                      f"{args.out.name})",
           "architectures": found}
    args.out.write_text(json.dumps(out, sort_keys=True, default=str) + "\n")
    print(f"{len(found)} architectures -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
