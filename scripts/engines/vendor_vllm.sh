#!/usr/bin/env bash
# Refresh posenc_lib/_vendor/vllm from a vLLM wheel on PyPI: the package
# vllm/model_executor/layers/rotary_embedding/ unchanged, the wheel's RECORD
# lines for it (tests/test_engines.py recomputes each sha256), its LICENSE.
# Usage: scripts/engines/vendor_vllm.sh [VERSION]   (default 0.33.0)
# Then update vendor.txt (version, wheel sha256, commit from vllm/_version.py)
# and rerun tests/test_engines.py: a new release may change what the tests pin.
set -euo pipefail
VER=${1:-0.33.0}
DEST=posenc_lib/_vendor/vllm
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 -m pip download -q "vllm==$VER" --no-deps --only-binary :all: -d "$TMP"
WHEEL=$(ls "$TMP"/vllm-*.whl)
sha256sum "$WHEEL"
PKG=vllm/model_executor/layers/rotary_embedding
(cd "$TMP" && unzip -q "$WHEEL" "$PKG/*" "vllm/_version.py" "vllm-$VER.dist-info/*")
rm -rf "$DEST/vllm"
mkdir -p "$DEST/$PKG"
cp "$TMP/$PKG"/*.py "$DEST/$PKG/"
cp "$TMP/vllm-$VER.dist-info/licenses/LICENSE" "$DEST/LICENSE"
grep "^$PKG/" "$TMP/vllm-$VER.dist-info/RECORD" > "$DEST/RECORD"
grep commit_id "$TMP/vllm/_version.py"
