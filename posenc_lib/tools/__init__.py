"""The reader tools, built on the numerics (and imported by the figures that draw
their results):

* :mod:`~posenc_lib.tools.inspector`: what a model's ``config.json`` sets up
  (``python -m posenc_lib inspect``);
* :mod:`~posenc_lib.tools.crosscheck`, :mod:`~posenc_lib.tools.conformance` and
  :mod:`~posenc_lib.tools.tiny_model`: the inspector against a tiny model built by
  transformers itself (``python -m posenc_lib crosscheck``);
* :mod:`~posenc_lib.tools.engines`: vLLM's, SGLang's and llama.cpp's RoPE and KV cache;
* :mod:`~posenc_lib.tools.diagnose`: the bug in a reader's RoPE
  (``python -m posenc_lib diagnose``);
* :mod:`~posenc_lib.tools.exercises`: the graded exercises;
* :mod:`~posenc_lib.tools.experiment`: chapter 7's study
  (``python -m posenc_lib experiment``).

Import each explicitly (``from posenc_lib.tools import inspector``); importing the
package imports none of them.
"""
