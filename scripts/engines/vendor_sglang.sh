#!/usr/bin/env bash
# Refresh posenc_lib/_vendor/sglang from an SGLang wheel on PyPI: the package
# sglang/srt/layers/rotary_embedding/ unchanged, the wheel's RECORD lines for
# it (tests/test_engines.py recomputes each sha256), its LICENSE.
# Usage: scripts/engines/vendor_sglang.sh [VERSION]   (default 0.5.23)
# Then update vendor.txt (version, wheel name and sha256) and rerun
# tests/test_engines.py: a new release may change what the tests pin, and the
# loader's stubs (posenc_lib/_vendor/__init__.py) may need a new name.
set -euo pipefail
VER=${1:-0.5.23}
DEST=posenc_lib/_vendor/sglang
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
python3 -m pip download -q "sglang==$VER" --no-deps --only-binary :all: -d "$TMP"
WHEEL=$(ls "$TMP"/sglang-*.whl)
sha256sum "$WHEEL"
PKG=sglang/srt/layers/rotary_embedding
(cd "$TMP" && unzip -q "$WHEEL" "$PKG/*" "sglang/_version.py" "sglang-$VER.dist-info/*")
rm -rf "$DEST/sglang"
mkdir -p "$DEST/$PKG"
cp "$TMP/$PKG"/*.py "$DEST/$PKG/"
cp "$TMP/sglang-$VER.dist-info/licenses/LICENSE" "$DEST/LICENSE"
grep "^$PKG/" "$TMP/sglang-$VER.dist-info/RECORD" > "$DEST/RECORD"
ls "$TMP/sglang-$VER.dist-info/licenses/"
grep commit_id "$TMP/sglang/_version.py"
