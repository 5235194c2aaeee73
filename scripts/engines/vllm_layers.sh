#!/usr/bin/env bash
# make vllm-layers: vLLM 0.33.0's model classes on every causal-LM type it
# serves (scripts/engines/vllm_layers.py), without installing vLLM. Fetches
# the wheel from PyPI (sha256-checked), extracts its Python files into
# .cache/vllm-layers/src, installs the pinned pure-Python imports
# (vllm-layers-requirements.txt, --no-deps) into .cache/vllm-layers/deps,
# and runs the script in its own venv (.cache/vllm-layers/venv: torch 2.14.1,
# torchvision, vllm-layers-venv-requirements.txt), in two shards (two cores),
# merged into results/vllm-layers.json.
set -euo pipefail
DIR=.cache/vllm-layers
VENV=$DIR/venv
SHA=4b6bdec4ab269990bf70d45a3c1e94c3760a27064513760193b26d6f0da883aa
WHEEL=$DIR/vllm-0.33.0-cp38-abi3-manylinux_2_28_x86_64.whl
mkdir -p "$DIR"
if [ ! -f "$VENV/.done" ]; then
  rm -rf "$VENV"
  "${PYTHON:-python3}" -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q -r scripts/engines/vllm-layers-venv-requirements.txt
  touch "$VENV/.done"
fi
PY=$VENV/bin/python
if [ ! -f "$WHEEL" ]; then
  "$PY" -m pip download -q "vllm==0.33.0" --no-deps --only-binary :all: -d "$DIR"
fi
echo "$SHA  $WHEEL" | sha256sum -c -
if [ ! -d "$DIR/src/vllm" ]; then
  rm -rf "$DIR/src"
  unzip -q "$WHEEL" 'vllm/*' -x 'vllm/*.so' 'vllm/**/*.so' -d "$DIR/src"
fi
if [ ! -f "$DIR/deps/.done" ]; then
  rm -rf "$DIR/deps"
  "$PY" -m pip install -q --no-deps --target "$DIR/deps" \
    -r scripts/engines/vllm-layers-requirements.txt
  touch "$DIR/deps/.done"
fi
[ "${1:-}" = "--setup-only" ] && exit 0
export VLLM_TARGET_DEVICE=cpu PYTHONPATH="$DIR/deps:$DIR/src:."
for i in 1 2; do
  nice -n 10 "$PY" scripts/engines/vllm_layers.py --wheel "$WHEEL" --shard "$i/2" \
    --out "$DIR/shard-$i.json" > "$DIR/shard-$i.log" 2>&1 &
done
wait
"$PY" scripts/engines/vllm_layers.py --wheel "$WHEEL" --out results/vllm-layers.json \
  --merge "$DIR/shard-1.json" "$DIR/shard-2.json"
# vLLM's rotary modules on every generated RoPE config form (CPU, float32)
for i in 1 2; do
  nice -n 10 "$PY" scripts/engines/vllm_rope_forms.py --wheel "$WHEEL" --shard "$i/2" \
    --out "$DIR/rope-shard-$i.json" > "$DIR/rope-shard-$i.log" 2>&1 &
done
wait
"$PY" scripts/engines/vllm_rope_forms.py --wheel "$WHEEL" --out results/vllm-rope-forms.json \
  --merge "$DIR/rope-shard-1.json" "$DIR/rope-shard-2.json"
