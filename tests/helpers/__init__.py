"""What the tests share that is not a test: paths, reference implementations built
from transformers, generated populations, the mutation harness.

``pyproject.toml`` puts ``tests/`` on the path (``[tool.pytest.ini_options]
pythonpath``), so a test writes ``from helpers.paths import ROOT``. No test file
imports another test file or ``conftest`` (tests/test_test_layout.py checks it).
"""
