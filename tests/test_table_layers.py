"""Every model of the inspector's table (posenc_lib/data/models.json) states
its layer count, read from a published file that its ``source`` cites, or is
listed here with the reason it does not."""

from __future__ import annotations

import pytest

from posenc_lib import config_reader
from posenc_lib.tools import inspector

#: Table entries without a layer count, and why: no public copy of the
#: model's own config (or of its authors' file stating the count) was found
#: that can be cited by repository, path and commit.
NO_CITED_LAYER_COUNT: dict[str, str] = {}


def test_every_entry_has_a_layer_count_or_a_reason():
    missing = []
    for name in inspector.model_names():
        text, _ = config_reader._text_config(inspector.model_config(name))
        if config_reader.num_layers(text) is None and name not in NO_CITED_LAYER_COUNT:
            missing.append(name)
    assert not missing, f"no num_hidden_layers and no listed reason: {missing}"


def test_listed_reasons_are_still_needed():
    for name in NO_CITED_LAYER_COUNT:
        text, _ = config_reader._text_config(inspector.model_config(name))
        assert config_reader.num_layers(text) is None, f"{name} has one now: unlist it"


@pytest.mark.parametrize("name, layers, cited", [
    ("deepseek-v3", 61, "deepseek-ai/DeepSeek-V3/blob/b4e06d883e655af15b9510ea155a6ae0"),
    ("gpt-neox-20b", 44, "EleutherAI/gpt-neox/blob/b2f1101da0e56cc0caee8fee60ffaaa4c0"),
    ("gemma-7b", 28, "models/gemma/convert_gemma_weights_to_hf.py"),
    ("bloom-560m", 24, "smaller_models/tr11e-350M-ml.slurm"),
    ("t5-v1_1-base", 12, "t5/models/gin/models/bi_bert_base.gin"),
    ("llama-2-7b", 32, "arxiv.org/abs/2302.13971"),
    ("mistral-7b-v0.1", 32, "arxiv.org/abs/2310.06825"),
    ("phi-3-mini-128k-instruct", 32, "arxiv.org/abs/2404.14219"),
])
def test_added_layer_counts_are_cited(name, layers, cited):
    entry = inspector.model_entry(name)
    text, _ = config_reader._text_config(entry["config"])
    assert config_reader.num_layers(text) == layers
    assert any(cited in url for url in entry["source"]["read_from"])
