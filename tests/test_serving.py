"""What serving a model needs: the inspector's serving report, its inputs,
and the float16 overflow of positions."""

import pytest
import torch

from posenc_lib import inspect, rope


@pytest.mark.parametrize("target, label", [(131072, "(4 x L)"), (65536, "(2 x L)"),
                                           (49152, "(1.5 x L)")])
def test_out_of_range_label_states_the_ratio_to_L(target, label):
    report = inspect.inspect_config(inspect.model_config("qwen2.5-7b-instruct"),
                                    target_length=target)
    assert report["train_length"] == 32768
    line = next(line for line in inspect.format_report(report).splitlines()
                if "out of range" in line)
    assert f"at {target:,} tokens {label}" in line


def test_out_of_range_label_is_absent_at_the_configured_length():
    config = inspect.model_config("qwen2.5-7b-instruct-yarn")
    text = inspect.format_report(inspect.inspect_config(config))
    line = next(line for line in text.splitlines() if "out of range" in line)
    assert "x L)" not in line


def test_float16_positions_beyond_its_range_are_named_as_an_overflow():
    positions = torch.arange(65520, 65530)
    with pytest.raises(ValueError, match=r"positions overflow torch.float16: its "
                       r"largest finite value is 65,504"):
        rope.cos_sin_error(positions, 128, 1e6, angle_dtype=torch.float16)
    # the largest representable position still works, in float16 and beyond
    assert rope.cos_sin_error(torch.tensor([65504]), 128, 1e6,
                              angle_dtype=torch.float16).isfinite().all()
    assert rope.cos_sin_error(positions, 128, 1e6).isfinite().all()


def test_nan_positions_still_say_must_be_finite():
    with pytest.raises(ValueError, match="positions must be finite"):
        rope.rope_angles(torch.tensor([0.0, float("nan")]), rope.inv_freq(8))
