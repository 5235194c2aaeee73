"""The window-key forms the library refuses on purpose, by type: the start of
its message (shared by ``tests/test_window_keys.py`` and
``tests/test_attention_spans.py``, which judge the same dicts).

CPM-Ant's cache slides over its prompt tokens (not modelled); a layer_types
key of LFM2's 4.57.6 class (which checks nothing; 5.x's model fails)."""

REFUSED = {
    "cpmant": ("cpmant: sliding_window, attention_chunk_size or layer_types",),
    "lfm2": ("layer_types[0] is 'sliding_attention', which model_type 'lfm2'",),
}
