"""The transformers releases whose behaviour the library reproduces (private:
``serving`` and ``config_reader`` both ask which one applies)."""

from __future__ import annotations

#: The transformers releases whose RoPE validation :func:`posenc_lib.serving.transformers_warnings`
#: reproduces: 4.57.6 (``rope_config_validation`` and its per-type validators)
#: and 5.24.0 (``RotaryEmbeddingConfigMixin.validate_rope``), both in
#: ``src/transformers/modeling_rope_utils.py``.
MIMICKED_VERSIONS = {4: "4.57.6", 5: "5.24.0"}


def mimicked_transformers_version(version: str | None = None) -> str:
    """The transformers release whose messages :func:`posenc_lib.serving.transformers_warnings`
    reproduces for ``version`` (default: the installed transformers, read
    from its package metadata without importing it; 4.57.6 when none is
    installed). Any 4.x maps to 4.57.6 and any 5.x to 5.24.0 (checked against
    those two releases only)."""
    if version is None:
        from importlib import metadata

        try:
            version = metadata.version("transformers")
        except metadata.PackageNotFoundError:
            return MIMICKED_VERSIONS[4]
    if not isinstance(version, str):
        raise ValueError(f"version must be a string such as '4.57.6' or '5.24.0', "
                         f"got {version!r}")
    major = version.split(".")[0]
    if not major.isdigit() or int(major) not in MIMICKED_VERSIONS:
        raise ValueError(f"version must be a transformers 4.x or 5.x release "
                         f"(4.57.6 and 5.24.0 are reproduced), got {version!r}")
    return MIMICKED_VERSIONS[int(major)]
