"""The staleness check of chapter 7's results files, shared by
:mod:`posenc_lib.tools.experiment` and :mod:`posenc_lib.retrieval` (neither imports
the other for it)."""

from __future__ import annotations

from typing import Mapping


def refuse_stale(results: Mapping, path, config_hash: str, schema_version: int) -> None:
    """Raise ``ValueError`` unless ``results`` (read from ``path``) carry
    ``schema_version`` and were produced by the configuration whose hash is
    ``config_hash``."""
    if results.get("schema_version") != schema_version:
        raise ValueError(f"path: {path} has schema_version {results.get('schema_version')}, "
                         f"expected {schema_version}")
    if results.get("config_hash") != config_hash:
        raise ValueError(f"path: {path} was produced by configuration "
                         f"{results.get('config_hash')}, but the current one is "
                         f"{config_hash}: re-run `python -m posenc_lib experiment`")
