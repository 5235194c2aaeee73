"""vLLM 0.33.0's own KV-cache spec classes, run on three table models.

Extracts the vllm 0.33.0 wheel's Python files into a temporary directory (no
install; the wheel is checked against the sha256 that vendor.txt records),
imports vllm/v1/kv_cache_interface.py with the project's torch, and records
each spec's page_size_bytes and, for max_model_len 32,768 and one token in
flight, max_memory_usage_bytes (per layer) under "vllm_kv" in
results/engines.json. The spec arguments are what vLLM's layers pass
(mla_attention.py 1371-1388: num_kv_heads 1, head_size = kv_lora_rank +
qk_rope_head_dim; attention.py 611-677: the config's KV heads and head_dim;
torch_utils.py 40-57: fp8 -> torch.uint8). tests/test_engines.py compares
posenc_lib.tools.engines.engine_kv_cache_bytes with these figures.

    python scripts/engines/vllm_kv_pages.py --wheel vllm-0.33.0-...whl
"""

import argparse
import hashlib
import json
import sys
import tempfile
import zipfile
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[2]
SHA256 = "4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa"
MAX_MODEL_LEN = 32768


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--wheel", type=Path, required=True)
    parser.add_argument("--out", type=Path, default=ROOT / "results" / "engines.json")
    args = parser.parse_args()
    digest = hashlib.sha256(args.wheel.read_bytes()).hexdigest()
    if digest != SHA256:
        sys.exit(f"--wheel: sha256 {digest} is not vllm 0.33.0's {SHA256}")
    import torch

    sys.path.insert(0, str(ROOT))
    from posenc_lib.tools import inspector

    tmp = tempfile.mkdtemp()
    with zipfile.ZipFile(args.wheel) as wheel:
        wheel.extractall(tmp, [n for n in wheel.namelist()
                               if n.startswith("vllm/") and n.endswith(".py")])
    sys.path.insert(0, tmp)
    import vllm.v1.kv_cache_interface as kv

    vllm_config = SimpleNamespace(
        model_config=SimpleNamespace(max_model_len=MAX_MODEL_LEN),
        parallel_config=SimpleNamespace(decode_context_parallel_size=1),
        max_in_flight_tokens=1)
    dtypes = {"auto": torch.bfloat16, "fp8": torch.uint8}
    entries = []
    for model, kind in (("deepseek-v3.1", "mla"), ("llama-3.1-8b", "full"),
                        ("gpt-oss-20b", "full"), ("gpt-oss-20b", "sliding")):
        c = inspector.model_config(model)
        for cache_dtype, dtype in dtypes.items():
            common = {"block_size": 16, "dtype": dtype}
            if kind == "mla":
                spec = kv.MLAAttentionSpec(
                    num_kv_heads=1, head_size=c["kv_lora_rank"] + c["qk_rope_head_dim"],
                    cache_dtype_str=cache_dtype, **common)
            else:
                head = c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]
                cls = kv.FullAttentionSpec if kind == "full" else kv.SlidingWindowSpec
                extra = {} if kind == "full" else {"sliding_window": c["sliding_window"]}
                spec = cls(num_kv_heads=c["num_key_value_heads"], head_size=head,
                           head_size_v=head, **extra, **common)
            entries.append({"model": model, "layer_type": {"mla": "full_attention",
                                                           "full": "full_attention",
                                                           "sliding": "sliding_attention"}[kind],
                            "spec": type(spec).__name__, "kv_cache_dtype": cache_dtype,
                            "page_size_bytes": spec.page_size_bytes,
                            "max_memory_usage_bytes": spec.max_memory_usage_bytes(vllm_config)})
            print(json.dumps(entries[-1]))
    result = json.loads(args.out.read_text())
    result["vllm_kv"] = {"package": "vllm==0.33.0", "commit": "4ba787ec9",
                         "wheel_sha256": SHA256, "block_size": 16,
                         "max_model_len": MAX_MODEL_LEN, "max_in_flight_tokens": 1,
                         "source": "vllm/v1/kv_cache_interface.py of the wheel, run "
                                   "(scripts/engines/vllm_kv_pages.py)",
                         "entries": entries}
    args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
