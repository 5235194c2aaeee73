#!/usr/bin/env bash
# make engines: build llama-cpp-python from its source distribution (CPU only)
# in a separate venv and run llama.cpp on tiny models, case by case, against
# transformers and the predictions of posenc_lib.tools.engines; writes
# results/engines.json. Never installs into the project's .venv. Needs network
# the first time.
set -euo pipefail
VER=0.3.36
PY=${PY:-.venv/bin/python}
VENV=.cache/engines-venv
DL=.cache/engines-dl
SRC=.cache/engines-src
SDIST=$DL/llama_cpp_python-$VER.tar.gz
mkdir -p "$DL" "$SRC"
test -x "$VENV/bin/python" || python3 -m venv "$VENV"
if [ ! -f "$SDIST" ]; then
  echo "downloading the llama-cpp-python $VER source distribution"
  "$VENV/bin/python" -m pip download -q --no-deps --no-binary :all: \
    "llama-cpp-python==$VER" -d "$DL"
fi
if ! "$VENV/bin/python" -c "import llama_cpp" 2>/dev/null; then
  echo "building llama-cpp-python $VER (CPU only, 2 jobs); this takes a while"
  start=$(date +%s)
  CMAKE_ARGS="-DGGML_NATIVE=OFF -DGGML_CUDA=OFF -DGGML_METAL=OFF -DGGML_BLAS=OFF \
-DGGML_OPENMP=OFF -DLLAMA_CURL=OFF -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
  CMAKE_BUILD_PARALLEL_LEVEL=2 \
    "$VENV/bin/python" -m pip install -q --no-binary llama-cpp-python "$SDIST" numpy
  echo $(( $(date +%s) - start )) > .cache/engines-build-seconds
  echo "built in $(cat .cache/engines-build-seconds) s"
fi
test -d "$SRC/llama_cpp_python-$VER" || tar xzf "$SDIST" -C "$SRC"
VENDOR="$SRC/llama_cpp_python-$VER/vendor/llama.cpp"
test -f "$VENDOR/convert_hf_to_gguf.py" || { echo "the sdist has no convert_hf_to_gguf.py"; exit 1; }
grep -m1 "update llama.cpp to" "$SRC/llama_cpp_python-$VER/CHANGELOG.md"
BUILD=()
test -f .cache/engines-build-seconds && BUILD=(--build-seconds "$(cat .cache/engines-build-seconds)")
OMP_NUM_THREADS=1 PYTHONPATH=. "$PY" scripts/engines/compare_llama_cpp.py \
  --vendor "$VENDOR" --engine-python "$VENV/bin/python" "${BUILD[@]}" \
  --out results/engines.json
# the KV cache llama.cpp allocates for each case (its own log lines), merged
# into the same file; the figures above are left as they are
OMP_NUM_THREADS=1 PYTHONPATH=. "$PY" scripts/engines/kv_llama_cpp.py \
  --vendor "$VENDOR" --engine-python "$VENV/bin/python" --out results/engines.json
# vLLM 0.33.0's KV spec classes, run: only with the wheel at hand (VLLM_WHEEL)
if [ -n "${VLLM_WHEEL:-}" ]; then
  PYTHONPATH=. "$PY" scripts/engines/vllm_kv_pages.py --wheel "$VLLM_WHEEL" \
    --out results/engines.json
fi
