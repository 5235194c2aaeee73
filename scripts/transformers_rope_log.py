"""Log what an installed transformers says about RoPE configs (a worker).

Reads a JSON list of configs (``config.json`` mappings with ``model_type``)
on stdin, builds each with ``AutoConfig.for_model`` in the interpreter that
runs this script, and writes on stdout a JSON object: ``version`` (the
installed transformers) and ``logs``, one entry per config, the list of
RoPE messages its ``transformers`` logger recorded (every WARNING record
that mentions rope or yarn, unrecognized keys left out), followed by
``"<ExceptionType>: <message>"`` (its first 200 characters) where building
the config raised.
It imports nothing from this repository, so any interpreter with
transformers runs it, e.g. transformers 5.24.0's::

    .cache/transformers5-venv/bin/python scripts/transformers_rope_log.py < configs.json

``scripts/capture_transformers_warnings.py`` uses it to store 5.24.0's
messages for ``tests/test_transformers_warnings.py``.
"""

from __future__ import annotations

import copy
import json
import logging
import sys


def rope_log(config: dict, *, catch: bool = True) -> list[str]:
    """The RoPE messages transformers logs (and raises) while building ``config``;
    with ``catch=False`` an exception propagates instead of being recorded."""
    from transformers import AutoConfig

    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record)

    logger = logging.getLogger("transformers")
    handler, level = Keep(), logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.WARNING)
    logging.Logger.warning_once.cache_clear()  # each config as if loaded first
    raised = []
    try:
        fields = copy.deepcopy(config)
        AutoConfig.for_model(fields.pop("model_type"), **fields)
    except Exception as error:  # noqa: BLE001 - recorded, compared by the test
        if not catch:
            raise
        text = error.args[0] if error.args and isinstance(error.args[0], str) else str(error)
        raised = [f"{type(error).__name__}: {text}"[:200]]  # (a list of every model type)
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
    messages = [r.getMessage() for r in records]
    rope = [m for m in messages if "rope" in m.lower() or "yarn" in m.lower()]
    return [m for m in rope if not m.startswith("Unrecognized keys")] + raised


def main() -> None:
    import transformers

    configs = json.load(sys.stdin)
    json.dump({"version": transformers.__version__,
               "logs": [rope_log(c) for c in configs]}, sys.stdout)


if __name__ == "__main__":
    main()
