"""vLLM 0.33.0's rotary embedding as its own model classes build it, on every
generated RoPE config form of ``results/config_forms-5.json``.

Each form (a tiny config of a causal-LM type with its RoPE keys drawn in one
of the forms practitioners write: ``type`` or ``rope_type``, integer or
float factors, missing or extra keys, ...) gets the vLLM architecture of its
model type (:func:`vllm_layers.architectures`) and is built by vLLM's own
code as ``vllm serve`` builds it, on the CPU in float32 (the meta device
holds no values): ``EngineArgs(model=dir).create_engine_config()`` and
``initialize_model``. The rotary module of the first layer that has one is
stored: its class, ``is_neox_style``, ``head_size``, ``rotary_dim``,
``max_position_embeddings`` and ``base``, and its cos/sin cache rows at
positions 1 and :data:`FAR` (cut to the cache); or the error vLLM raised,
with the file and function it was raised in.

``tests/test_vllm_rope_forms.py`` compares ``posenc_lib.tools.engines``'s
vLLM rotary claims (its transcription of the arguments each model file
passes to ``get_rope``, run through vLLM's vendored rotary code) with these
modules, form by form. ``make vllm-layers`` runs this script after
``vllm_layers.py``, in the same environment.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts" / "engines"))

import vllm_layers  # sets the CPU platform before vLLM loads

#: The far position whose cos/sin row is stored beside position 1.
FAR = 4000


def _rotary(model):
    """The first rotary module of ``model`` (vLLM's ``RotaryEmbeddingBase``)
    and the number of distinct rotary classes it holds."""
    from vllm.model_executor.layers.rotary_embedding.base import RotaryEmbeddingBase
    from vllm.model_executor.layers.rotary_embedding.phi3_long_rope_scaled_rope import (
        Phi3LongRoPEScaledRotaryEmbedding)

    kinds = (RotaryEmbeddingBase, Phi3LongRoPEScaledRotaryEmbedding)
    found = [m for m in model.modules() if isinstance(m, kinds)]
    return (found[0] if found else None), sorted({type(m).__name__ for m in found})


def _rows(module, positions) -> list[list[float]] | None:
    cache = getattr(module, "cos_sin_cache", None)
    if cache is None or cache.device.type == "meta":
        return None
    return [cache[p].double().tolist() for p in positions if p < cache.shape[0]]


def build(raw: dict) -> dict:
    """vLLM's model for ``raw`` on the CPU in float32: its rotary module's
    fields and rows, or the error it raised."""
    import torch
    from vllm.config import set_current_vllm_config
    from vllm.engine.arg_utils import EngineArgs
    from vllm.model_executor.layers import rotary_embedding
    from vllm.model_executor.model_loader.utils import initialize_model

    # get_rope hands out cached modules, and a model file may edit the one it
    # gets (ernie45.py sets is_neox_style = False): one model per process, as
    # vllm serve builds it, so the cache starts empty for each form
    rotary_embedding._ROPE_DICT.clear()
    with tempfile.TemporaryDirectory() as d:
        Path(d, "config.json").write_text(json.dumps(raw))
        try:
            args = EngineArgs(model=d, skip_tokenizer_init=True, load_format="dummy",
                              enforce_eager=True, dtype="float32")
            vllm_config = args.create_engine_config()
            with set_current_vllm_config(vllm_config), torch.device("cpu"):
                model = initialize_model(vllm_config=vllm_config)
        except Exception as error:  # noqa: BLE001 -- vLLM's own refusal, stored
            frame = traceback.extract_tb(error.__traceback__)[-1]
            where = frame.filename
            for root in ("/site-packages/", "/deps/", "/src/"):  # the package's path
                where = where.rsplit(root, 1)[-1]
            return {"refused": f"{type(error).__name__}: {str(error)[:300]}",
                    "raised_in": f"{where}:{frame.name}"}
    module, classes = _rotary(model)
    if module is None:
        return {"rotary": None}
    out = {"rotary": type(module).__name__, "rotary_classes": classes}
    for field in ("head_size", "rotary_dim", "max_position_embeddings", "base",
                  "is_neox_style", "scaling_factor", "use_long_rope"):
        value = getattr(module, field, None)
        if isinstance(value, (int, float, bool)):
            out[field] = value
    out["rows"] = _rows(module, (1, FAR))
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--wheel", type=Path, required=True,
                        help="the vllm 0.33.0 wheel its Python files came from")
    parser.add_argument("--forms", type=Path,
                        default=ROOT / "results" / "config_forms-5.json")
    parser.add_argument("--shard", default="1/1", help="i/n: every n-th form from the i-th")
    parser.add_argument("--merge", type=Path, nargs="*", default=None,
                        help="write --out from these shards' outputs instead")
    args = parser.parse_args(argv)
    if args.merge:
        parts = [json.loads(p.read_text()) for p in args.merge]
        forms = sorted((f for p in parts for f in p["forms"]), key=lambda f: f["index"])
        out = {**parts[0], "seconds": max(p["seconds"] for p in parts), "forms": forms}
        args.out.write_text(json.dumps(out, sort_keys=True) + "\n")
        return 0
    digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
    if digest != vllm_layers.SHA256:
        sys.exit(f"--wheel: sha256 {digest} is not vllm 0.33.0's {vllm_layers.SHA256}")
    import torch
    import transformers
    import vllm
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(1)
    hf_logging.set_verbosity_error()
    vllm_layers._stub_compiled_ops()
    vllm_layers._distributed()
    by_type: dict[str, str] = {}
    for arch, model_type in vllm_layers.architectures().items():
        if arch.endswith("ForCausalLM"):
            by_type.setdefault(model_type, arch)
    entries = json.loads(args.forms.read_text())["entries"]
    i, n = (int(x) for x in args.shard.split("/"))
    start, found = time.perf_counter(), []
    for index, entry in list(enumerate(entries))[i - 1::n]:
        arch = by_type.get(entry["model_type"])
        if arch is None:
            continue
        raw = {**entry["raw"], "architectures": [arch]}
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = build(raw)
        found.append({"index": index, "model_type": entry["model_type"],
                      "kind": entry["kind"], "architecture": arch, "raw": raw, **got})
        print(f"[{len(found)}] {arch} {entry['kind']}: "
              f"{got.get('rotary') or got.get('refused', '')[:60]}", file=sys.stderr,
              flush=True)
    out = {"vllm": vllm.__version__, "wheel_sha256": digest,
           "transformers": transformers.__version__, "torch": torch.__version__,
           "far": FAR, "seconds": round(time.perf_counter() - start, 1),
           "command": "make vllm-layers (scripts/engines/vllm_rope_forms.py)",
           "forms": found}
    args.out.write_text(json.dumps(out, sort_keys=True) + "\n")
    print(f"{len(found)} forms -> {args.out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
