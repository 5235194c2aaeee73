"""Multi-axis RoPE against dense rotations and the published implementations.

References: transformers' Qwen2-VL / Qwen2.5-VL ``get_rope_index`` and
``apply_multimodal_rotary_pos_emb``, Qwen3-VL's interleaved M-RoPE, Qwen2-VL's
vision-encoder 2D RoPE, and rotary-embedding-torch's axial frequencies.
"""

from __future__ import annotations

import math
from fractions import Fraction
from types import SimpleNamespace

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from posenc_lib import multidim, rope

# -- independent computations ------------------------------------------------------


def _pair_features(dim, layout):
    """The two feature indices of every pair, written out for each layout."""
    if layout == "half":
        return [(i, i + dim // 2) for i in range(dim // 2)]
    return [(2 * i, 2 * i + 1) for i in range(dim // 2)]


def _dense_multiaxis(x, positions, inv_freq, axis_of_freq, layout):
    """Multiply each row by its block rotation matrix, built entry by entry."""
    dim = x.shape[-1]
    out = torch.empty_like(x)
    for n in range(x.shape[-2]):
        rotation = torch.zeros(dim, dim, dtype=torch.float64)
        for i, (a, b) in enumerate(_pair_features(dim, layout)):
            angle = float(positions[int(axis_of_freq[i]), n]) * float(inv_freq[i])
            rotation[a, a], rotation[a, b] = math.cos(angle), -math.sin(angle)
            rotation[b, a], rotation[b, b] = math.sin(angle), math.cos(angle)
        out[..., n, :] = x[..., n, :] @ rotation.T
    return out


def _scores(q, k, positions, inv_freq, axis_of_freq, layout="half"):
    q_rot = multidim.apply_multiaxis_rope(q, positions, inv_freq, axis_of_freq, layout=layout)
    k_rot = multidim.apply_multiaxis_rope(k, positions, inv_freq, axis_of_freq, layout=layout)
    return q_rot @ k_rot.transpose(-2, -1)


# -- the mechanism ------------------------------------------------------------------


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_one_axis_matches_the_dense_1d_rotation(layout, generator):
    """One axis is 1D RoPE: compare with the dense matrix, in float64 and float32."""
    x = torch.randn(2, 3, 17, 32, generator=generator, dtype=torch.float64)
    positions = torch.randint(0, 5000, (17,), generator=generator)
    f = rope.inv_freq(32, 500000.0, dtype=torch.float64)
    only = torch.zeros(16, dtype=torch.long)
    dense = _dense_multiaxis(x, positions[None], f, only, layout)
    ours = multidim.apply_multiaxis_rope(x, positions[None], f, only, layout=layout,
                                         attention_factor=1.3)
    # angles up to 5000 rad: float64 rounding of the angle is ~5000 * 2**-53 ~ 1e-12
    assert torch.allclose(ours, 1.3 * dense, atol=1e-10)
    ours32 = multidim.apply_multiaxis_rope(x.float(), positions[None], f.float(), only,
                                           layout=layout)
    # float32: rounding the frequency and the angle (<= 5000 rad) costs <= 5000 * 2**-23
    # rad per pair, which moves a feature by at most twice that times max |x|
    tolerance = 2 * float(x.abs().max()) * 5000 * 2.0**-23
    assert torch.allclose(ours32.double(), dense, atol=tolerance)


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("interleaved", [False, True])
def test_matches_dense_block_rotations(layout, interleaved, generator):
    sections = [3, 2, 3]
    axis = multidim.mrope_axis_map(sections, interleaved=interleaved)
    x = torch.randn(2, 9, 16, generator=generator, dtype=torch.float64)
    positions = torch.randint(-50, 300, (3, 9), generator=generator)
    f = rope.inv_freq(16, 100.0, dtype=torch.float64)
    ours = multidim.apply_multiaxis_rope(x, positions, f, axis, layout=layout)
    assert torch.allclose(ours, _dense_multiaxis(x, positions, f, axis, layout), atol=1e-12)


def test_equal_ids_reduce_to_1d_rope_for_any_map(generator):
    x = torch.randn(4, 11, 64, generator=generator, dtype=torch.float64)
    ids = torch.randint(0, 10000, (11,), generator=generator)
    f = rope.inv_freq(64, 1e6, dtype=torch.float64)
    for axis in (multidim.mrope_axis_map([8, 12, 12]),
                 multidim.mrope_axis_map([12, 10, 10], interleaved=True),
                 torch.randint(0, 3, (32,), generator=generator)):
        ours = multidim.apply_multiaxis_rope(x, ids.expand(3, -1), f, axis)
        assert torch.equal(ours, rope.apply_rope(x, ids, f))


# -- translation invariance in 2D and 3D --------------------------------------------


@pytest.mark.parametrize("interleaved", [False, True])
@pytest.mark.parametrize("shape", [(5, 7), (3, 4, 5)])
def test_scores_depend_only_on_the_offset_vector(shape, interleaved, generator):
    n_axes, dim = len(shape), 48
    axis = multidim.mrope_axis_map([dim // 2 // n_axes] * n_axes, interleaved=interleaved)
    f = multidim.axial_inv_freq(axis, 100.0, dtype=torch.float64)
    grid = multidim.grid_positions(shape)
    q = torch.randn(2, grid.shape[1], dim, generator=generator, dtype=torch.float64)
    k = torch.randn(2, grid.shape[1], dim, generator=generator, dtype=torch.float64)
    reference = _scores(q, k, grid, f, axis)
    for _ in range(5):
        shift = torch.randint(-1000, 1000, (n_axes, 1), generator=generator)
        assert torch.allclose(_scores(q, k, grid + shift, f, axis), reference, atol=1e-9)
    # A shift of one axis for part of the tokens is not a translation: scores change.
    moved = grid.clone()
    moved[0, : grid.shape[1] // 2] += 3
    assert not torch.allclose(_scores(q, k, moved, f, axis), reference, atol=1e-3)


def test_split_and_interleaved_groups_differ_by_a_pair_permutation(generator):
    dim = 32
    split = multidim.mrope_axis_map([8, 8])
    groups = multidim.mrope_axis_map([8, 8], interleaved=True)
    f_split = multidim.axial_inv_freq(split, 100.0, dtype=torch.float64)
    f_groups = multidim.axial_inv_freq(groups, 100.0, dtype=torch.float64)
    # Pair j of the grouped map is pair perm[j] of the split map.
    perm = torch.stack([torch.arange(8), torch.arange(8) + 8], dim=1).flatten()
    assert torch.equal(split[perm], groups) and torch.equal(f_split[perm], f_groups)
    features = torch.cat([perm, perm + dim // 2])  # the same permutation, on half-layout features
    grid = multidim.grid_positions((4, 6))
    q = torch.randn(grid.shape[1], dim, generator=generator, dtype=torch.float64)
    k = torch.randn(grid.shape[1], dim, generator=generator, dtype=torch.float64)
    assert torch.allclose(_scores(q[:, features], k[:, features], grid, f_groups, groups),
                          _scores(q, k, grid, f_split, split), atol=1e-12)


# -- axial RoPE against rotary-embedding-torch and Qwen2-VL's vision encoder ----------


@pytest.mark.parametrize("shape", [(6, 5), (3, 4, 5)])
def test_axial_matches_rotary_embedding_torch(shape, generator):
    ret = pytest.importorskip("rotary_embedding_torch")
    axis_dim = 16
    rotary = ret.RotaryEmbedding(dim=axis_dim, theta=100, cache_if_possible=False)
    offsets = torch.randint(0, 50, (len(shape),), generator=generator)
    freqs = rotary.get_axial_freqs(*shape, offsets=offsets)  # (*shape, n_axes * axis_dim)
    dim = len(shape) * axis_dim
    x = torch.randn(1, *shape, dim, generator=generator)  # a batch axis: no sequence slicing
    expected = ret.apply_rotary_emb(freqs, x).reshape(-1, dim)
    axis = multidim.mrope_axis_map([axis_dim // 2] * len(shape))
    f = multidim.axial_inv_freq(axis, 100.0, dtype=torch.float32)
    positions = multidim.grid_positions(shape) + offsets[:, None]
    ours = multidim.apply_multiaxis_rope(x.reshape(-1, dim), positions, f, axis,
                                         layout="interleaved")
    assert torch.allclose(f[: axis_dim // 2], rotary.freqs.detach(), rtol=1e-6, atol=0)
    assert torch.allclose(ours, expected, atol=2e-5)


def test_axial_matches_qwen2_vl_vision_encoder(generator):
    """Qwen2-VL's vision encoder: 2D RoPE over each image's own patch grid.

    ``rot_pos_emb`` lists patches merge window by merge window (the 2 x 2
    patches that become one language-model token are adjacent); the
    positions below are written out independently in that order.
    """
    vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
    head_dim, m = 32, 2
    grid_thw = torch.tensor([[2, 6, 4], [1, 4, 8]])  # a 2-step video, then an image
    encoder = SimpleNamespace(spatial_merge_size=m,
                              rotary_pos_emb=vl.VisionRotaryEmbedding(head_dim // 2))
    angles = vl.Qwen2VisionTransformerPretrainedModel.rot_pos_emb(encoder, grid_thw)
    emb = torch.cat([angles, angles], dim=-1)
    positions = torch.tensor([(bh * m + y, bw * m + x)
                              for t, h, w in grid_thw.tolist() for _ in range(t)
                              for bh in range(h // m) for bw in range(w // m)
                              for y in range(m) for x in range(m)]).T
    n = positions.shape[1]
    q = torch.randn(n, 2, head_dim, generator=generator)
    k = torch.randn(n, 2, head_dim, generator=generator)
    q_ref, k_ref = vl.apply_rotary_pos_emb_vision(q, k, emb.cos(), emb.sin())
    axis = multidim.mrope_axis_map([head_dim // 4, head_dim // 4])
    f = multidim.axial_inv_freq(axis, 10000.0, dtype=torch.float32)
    for x, ref in ((q, q_ref), (k, k_ref)):
        ours = multidim.apply_multiaxis_rope(x.transpose(0, 1), positions, f, axis)
        assert torch.allclose(ours.transpose(0, 1), ref, atol=1e-5)


# -- M-RoPE against Qwen2-VL and Qwen3-VL --------------------------------------------


def test_contiguous_map_is_qwen2_vl_mrope(generator):
    vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
    from transformers.models.qwen2_vl.configuration_qwen2_vl import Qwen2VLTextConfig

    config = Qwen2VLTextConfig(hidden_size=256, num_attention_heads=2, rope_theta=1e6,
                               rope_scaling={"type": "mrope", "mrope_section": [16, 24, 24]})
    rotary = vl.Qwen2VLRotaryEmbedding(config)
    segments = [("text", 5), ("image", (1, 8, 6)), ("text", 3), ("video", (3, 4, 4)),
                ("text", 4)]
    ids = multidim.mrope_position_ids(segments)
    seq = ids.shape[1]
    q = torch.randn(1, 2, seq, 128, generator=generator)
    k = torch.randn(1, 2, seq, 128, generator=generator)
    cos, sin = rotary(q, ids[:, None, :])
    q_ref, k_ref = vl.apply_multimodal_rotary_pos_emb(q, k, cos, sin, [16, 24, 24])
    axis = multidim.mrope_axis_map([16, 24, 24], dim=128)
    for x, ref in ((q, q_ref), (k, k_ref)):
        ours = multidim.apply_multiaxis_rope(x, ids[:, None, :], rotary.inv_freq, axis)
        assert torch.allclose(ours, ref, atol=1e-5)
    # ... and not the interleaved map with the same sections.
    other = multidim.apply_multiaxis_rope(q, ids[:, None, :], rotary.inv_freq,
                                          multidim.mrope_axis_map([16, 24, 24], interleaved=True))
    assert not torch.allclose(other, q_ref, atol=1e-2)


def test_interleaved_map_is_qwen3_vl_mrope(generator):
    vl3 = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
    from transformers.models.qwen3_vl.configuration_qwen3_vl import Qwen3VLTextConfig

    config = Qwen3VLTextConfig(hidden_size=256, num_attention_heads=2, head_dim=128,
                               rope_theta=5e6, rope_scaling={"rope_type": "default",
                                                             "mrope_section": [24, 20, 20]})
    rotary = vl3.Qwen3VLTextRotaryEmbedding(config)
    # The map itself: label every pair with its axis, let Qwen3-VL pick.
    labels = torch.arange(3.0).view(3, 1, 1, 1).expand(3, 1, 1, 64).clone()
    picked = rotary.apply_interleaved_mrope(labels, [24, 20, 20]).flatten().long()
    assert torch.equal(picked, multidim.mrope_axis_map([24, 20, 20], interleaved=True))
    # The rotation.
    ids = multidim.mrope_position_ids([("text", 4), ("image", (1, 6, 8)), ("text", 3)])
    q = torch.randn(1, 2, ids.shape[1], 128, generator=generator)
    cos, sin = rotary(q, ids[:, None, :])
    q_ref, _ = vl3.apply_rotary_pos_emb(q, q, cos, sin)
    axis = multidim.mrope_axis_map([24, 20, 20], interleaved=True, dim=128)
    ours = multidim.apply_multiaxis_rope(q, ids[:, None, :], rotary.inv_freq, axis)
    assert torch.allclose(ours, q_ref, atol=1e-5)


@pytest.mark.parametrize("sections", [[16, 24, 24], [24, 20, 20], [5, 0, 9], [1, 7, 2, 4]])
def test_axis_maps_give_each_axis_its_section(sections):
    for interleaved in (False, True):
        axis = multidim.mrope_axis_map(sections, interleaved=interleaved)
        assert torch.bincount(axis, minlength=len(sections)).tolist() == sections
    contiguous = multidim.mrope_axis_map(sections).tolist()
    assert contiguous == sorted(contiguous)
    # Interleaved: among the first r*(number of axes still active) pairs, the axes alternate.
    interleaved = multidim.mrope_axis_map(sections, interleaved=True).tolist()
    active = [a for a, s in enumerate(sections) if s]
    rounds = min(sections[a] for a in active)
    assert interleaved[: rounds * len(active)] == active * rounds


def test_axial_inv_freq_gives_each_axis_a_rope_ladder():
    axis = torch.tensor([2, 0, 0, 1, 0, 2])
    f = multidim.axial_inv_freq(axis, 500.0, dtype=torch.float64)
    assert torch.equal(f[axis == 0], rope.inv_freq(6, 500.0, dtype=torch.float64))
    assert torch.equal(f[axis == 1], rope.inv_freq(2, 500.0, dtype=torch.float64))
    assert torch.equal(f[axis == 2], rope.inv_freq(4, 500.0, dtype=torch.float64))


def test_grid_positions_is_row_major():
    shape = (2, 3, 4)
    grid = multidim.grid_positions(shape)
    expected = [(t, h, w) for t in range(2) for h in range(3) for w in range(4)]
    assert [tuple(c) for c in grid.T.tolist()] == expected


# -- position ids against get_rope_index ----------------------------------------------

_TEXT = 1000  # any id that is neither a vision token nor vision_start


def _reference_inputs(segments, config, m):
    """input_ids and grids as the Qwen2-VL processor lays them out."""
    tokens, images, videos = [], [], []
    for kind, size in segments:
        if kind == "text":
            tokens += [_TEXT + n for n in range(size)]
            continue
        tokens[-1] = config.vision_start_token_id  # every block follows <|vision_start|>
        token = config.image_token_id if kind == "image" else config.video_token_id
        tokens += [token] * (size[0] * (size[1] // m) * (size[2] // m))
        (images if kind == "image" else videos).append(list(size))
    grids = [torch.tensor(g) if g else None for g in (images, videos)]
    return torch.tensor([tokens]), grids[0], grids[1]


PROMPTS = {
    "text only": [("text", 9)],
    "text + image": [("text", 4), ("image", (1, 6, 8)), ("text", 5)],
    "text + video": [("text", 3), ("video", (4, 4, 6)), ("text", 2)],
    "several images": [("text", 2), ("image", (1, 4, 4)), ("text", 3), ("image", (1, 12, 2)),
                       ("text", 1), ("image", (1, 2, 10)), ("text", 6)],
    "image and video": [("text", 5), ("image", (1, 8, 6)), ("text", 2), ("video", (6, 4, 4)),
                        ("text", 3), ("image", (1, 2, 2)), ("text", 2)],
    "video then image, tall": [("text", 2), ("video", (2, 10, 2)), ("text", 1),
                               ("image", (1, 16, 4))],
}


@pytest.mark.parametrize("m", [1, 2, 3])
@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_position_ids_match_qwen2_vl(name, m):
    vl = pytest.importorskip("transformers.models.qwen2_vl.modeling_qwen2_vl")
    from transformers import Qwen2VLConfig

    segments = [(kind, (size[0], size[1] * m // 2 or m, size[2] * m // 2 or m))
                if kind != "text" else (kind, size) for kind, size in PROMPTS[name]]
    config = Qwen2VLConfig(vision_config={"spatial_merge_size": m})
    input_ids, images, videos = _reference_inputs(segments, config, m)
    expected, _ = vl.Qwen2VLModel.get_rope_index(SimpleNamespace(config=config), input_ids,
                                                  images, videos)
    ours = multidim.mrope_position_ids(segments, spatial_merge_size=m)
    assert ours.dtype == torch.int64 and ours.shape == (3, input_ids.shape[1])
    assert torch.equal(ours, expected[:, 0])
    assert sum(multidim.segment_lengths(segments, spatial_merge_size=m)) == ours.shape[1]


@pytest.mark.parametrize("seconds, tokens_per_second", [(1.0, 2), (2.0, 2), (1.0, 4), (3.0, 1)])
@pytest.mark.parametrize("name", ["text + video", "image and video", "video then image, tall"])
def test_absolute_time_matches_qwen2_5_vl(name, seconds, tokens_per_second):
    vl = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
    from transformers import Qwen2_5_VLConfig

    segments = PROMPTS[name]
    config = Qwen2_5_VLConfig(vision_config={"tokens_per_second": tokens_per_second})
    input_ids, images, videos = _reference_inputs(segments, config, 2)
    n_videos = videos.shape[0]
    expected, _ = vl.Qwen2_5_VLModel.get_rope_index(
        SimpleNamespace(config=config), input_ids, images, videos,
        second_per_grid_ts=torch.tensor([seconds] * n_videos))
    ours = multidim.mrope_position_ids(segments, seconds_per_grid=seconds,
                                       tokens_per_second=tokens_per_second)
    assert torch.equal(ours, expected[:, 0])
    # Qwen2.5-VL's default (no second_per_grid_ts) is one second per grid.
    default, _ = vl.Qwen2_5_VLModel.get_rope_index(SimpleNamespace(config=config), input_ids,
                                                   images, videos)
    assert torch.equal(multidim.mrope_position_ids(segments, seconds_per_grid=1.0,
                                                   tokens_per_second=tokens_per_second),
                       default[:, 0])


@pytest.mark.parametrize("frames, between", [(1, 3), (4, 4), (6, 1)])
def test_qwen3_vl_ids_are_per_frame_blocks(frames, between):
    """Qwen3-VL gives every frame (after the temporal merge) a block of its own.

    Its ``get_rope_index`` splits a video's grid ``(t, h, w)`` into ``t`` grids
    ``(1, h, w)``; the processor puts a timestamp and ``<|vision_start|>``
    before every frame. So the ids are ``mrope_position_ids`` of a prompt
    with one ``("video", (1, h, w))`` segment per frame.
    """
    vl3 = pytest.importorskip("transformers.models.qwen3_vl.modeling_qwen3_vl")
    from transformers import Qwen3VLConfig

    per_frame = [("video", (1, 4, 6)), ("text", between)] * frames
    segments = [("text", 5), ("image", (1, 8, 6)), ("text", 3)] + per_frame
    config = Qwen3VLConfig()
    input_ids, images, _ = _reference_inputs(segments, config, 2)
    video = torch.tensor([[frames, 4, 6]])       # as the processor reports it
    expected, _ = vl3.Qwen3VLModel.get_rope_index(
        SimpleNamespace(config=config), input_ids, images, video)
    assert torch.equal(multidim.mrope_position_ids(segments), expected[:, 0])


def test_fractional_seconds_follow_absolute_time(generator):
    """0.5 s per grid (4 fps): ids floor(t * 0.5 * 2) = t, not 0; 0.75 s: floor(1.5 t).

    transformers 4.57 casts each second_per_grid_ts entry to an integer before
    multiplying, so it gives every grid of such a video the same temporal id.
    This test pins our (the original Qwen2.5-VL) behaviour against the formula.
    """
    vl = pytest.importorskip("transformers.models.qwen2_5_vl.modeling_qwen2_5_vl")
    from transformers import Qwen2_5_VLConfig

    segments = [("text", 3), ("video", (5, 4, 4)), ("text", 2), ("video", (4, 2, 2)),
                ("text", 1)]
    per_video = [0.5, 0.75]
    ours = multidim.mrope_position_ids(segments, seconds_per_grid=per_video,
                                       tokens_per_second=2)
    lengths = multidim.segment_lengths(segments)
    start = 3
    first = ours[:, start:start + lengths[1]]
    assert first[0].tolist() == [3 + math.floor(t * 0.5 * 2) for t in range(5) for _ in range(4)]
    second_start = start + lengths[1] + lengths[2]
    second = ours[0, second_start:second_start + lengths[3]]
    base = int(ours[:, : second_start].max()) + 1
    assert second.tolist() == [base + math.floor(t * 0.75 * 2) for t in range(4)]
    assert second.tolist() == [base + t for t in (0, 1, 3, 4)]
    # Spatial channels and text are unaffected by the time scaling.
    plain = multidim.mrope_position_ids(segments)
    assert torch.equal(ours[1:, start:start + lengths[1]], plain[1:, start:start + lengths[1]])
    # The installed reference collapses the 0.5 s video to one temporal id (see docstring).
    config = Qwen2_5_VLConfig(vision_config={"tokens_per_second": 2})
    input_ids, images, videos = _reference_inputs(segments, config, 2)
    reference, _ = vl.Qwen2_5_VLModel.get_rope_index(
        SimpleNamespace(config=config), input_ids, images, videos,
        second_per_grid_ts=torch.tensor(per_video))
    collapsed = reference[0, 0, start:start + lengths[1]].unique().numel() == 1
    assert collapsed or torch.equal(ours, reference[:, 0])  # a fixed transformers agrees


def test_text_resumes_after_the_largest_vision_id():
    segments = [("text", 2), ("image", (1, 20, 4)), ("text", 3)]
    ids = multidim.mrope_position_ids(segments)
    n_image = 10 * 2
    block = ids[:, 2:2 + n_image]
    assert torch.equal(block[0], torch.full((n_image,), 2))           # time fixed
    assert block[1].tolist() == [2 + h for h in range(10) for _ in range(2)]
    assert block[2].tolist() == [2 + w for _ in range(10) for w in range(2)]
    after = ids[:, 2 + n_image:]
    assert torch.equal(after, torch.tensor([12, 13, 14]).expand(3, -1))  # 2 + 9 + 1


@pytest.mark.parametrize("fps", [0.5, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
@pytest.mark.parametrize("tokens_per_second", [1, 2, 4])
def test_absolute_time_is_the_floor_in_exact_arithmetic(fps, tokens_per_second):
    """floor(t * (2 / fps) * r), computed with fractions, for whole and fractional steps."""
    n_grids = 30
    ids = multidim.mrope_position_ids([("text", 2), ("video", (n_grids, 4, 4))],
                                      seconds_per_grid=2 / fps,
                                      tokens_per_second=tokens_per_second)
    offsets = (ids[0, 2:].view(n_grids, 4)[:, 0] - 2).tolist()
    step = Fraction(2) / Fraction(fps) * tokens_per_second
    assert offsets == [math.floor(t * step) for t in range(n_grids)]
    gaps = {b - a for a, b in zip(offsets, offsets[1:])}
    assert gaps <= {math.floor(step), math.ceil(step)}


# -- VideoRoPE ------------------------------------------------------------------------


def test_videorope_axis_map_is_the_reference_rule():
    """h, w alternate over the first h + w pairs (h first); time takes the rest."""
    for t, hw in ((16, 24), (8, 4), (1, 1), (0, 3)):
        expected = [1 + i % 2 if i < 2 * hw else 0 for i in range(t + 2 * hw)]
        assert multidim.videorope_axis_map([t, hw, hw]).tolist() == expected
    # Time gets the slowest pairs of the shared ladder.
    axis = multidim.videorope_axis_map([16, 24, 24], dim=128)
    theta = rope.inv_freq(128, 1e6, dtype=torch.float64)
    assert theta[axis == 0].max() < theta[axis != 0].min()


@pytest.mark.parametrize("layout", ["half", "interleaved"])
def test_videorope_rotation_matches_dense(layout, generator):
    axis = multidim.videorope_axis_map([4, 6, 6])
    segments = [("text", 3), ("video", (3, 6, 4)), ("text", 2)]
    ids = multidim.videorope_position_ids(segments, temporal_spacing=1.5)
    x = torch.randn(ids.shape[1], 32, generator=generator, dtype=torch.float64)
    f = rope.inv_freq(32, 1e4, dtype=torch.float64)
    ours = multidim.apply_multiaxis_rope(x, ids, f, axis, layout=layout)
    assert torch.allclose(ours, _dense_multiaxis(x, ids, f, axis, layout), atol=1e-12)


def _videorope_loop(segments, m, delta):
    """Token by token, from the paper's formulas (Wei et al. 2025, section 3)."""
    ids, start = [], 0.0
    for kind, size in segments:
        if kind == "text":
            ids += [(start + n,) * 3 for n in range(size)]
            start += size
            continue
        t_grid, h_grid, w_grid = size[0], size[1] // m, size[2] // m
        for t in range(t_grid):
            tau = start + delta * t
            for h in range(h_grid):
                for w in range(w_grid):
                    ids.append((tau, tau + h - (h_grid - 1) // 2,
                                tau + w - (w_grid - 1) // 2))
        start += delta * (t_grid - 1) + 1
    return torch.tensor(ids, dtype=torch.float64).T


@pytest.mark.parametrize("delta", [0.5, 1.0, 2.0, 3.0])
@pytest.mark.parametrize("name", sorted(PROMPTS))
def test_videorope_position_ids_match_a_literal_loop(name, delta):
    ours = multidim.videorope_position_ids(PROMPTS[name], temporal_spacing=delta)
    assert ours.dtype == torch.float64
    assert torch.equal(ours, _videorope_loop(PROMPTS[name], 2, delta))


def test_videorope_frame_centres_lie_on_the_text_diagonal():
    segments = [("text", 5), ("video", (4, 6, 10)), ("text", 3)]
    ids = multidim.videorope_position_ids(segments, temporal_spacing=2.0)
    block = ids[:, 5:5 + 4 * 3 * 5].view(3, 4, 3, 5)   # (axis, t, h, w), merged 3 x 5
    centres = block[:, :, 1, 2]                         # ((3-1)//2, (5-1)//2)
    assert torch.equal(centres[0], torch.tensor([5.0, 7.0, 9.0, 11.0]))
    assert torch.equal(centres[1], centres[0]) and torch.equal(centres[2], centres[0])
    # Text before the block, first centre, last centre, text after: one id apart.
    assert ids[:, 4].tolist() == [4.0] * 3 and ids[:, 5 + 60].tolist() == [12.0] * 3


def test_axis_kernel_is_a_mean_of_cosines():
    theta = rope.inv_freq(16, 100.0, dtype=torch.float64)
    axis = multidim.mrope_axis_map([3, 5])
    offsets = torch.tensor([[0.0, 1.0, 7.0], [-2.0, 50.0, 1e4]])
    ours = multidim.axis_kernel(offsets, theta, axis, 1)
    for n, offset in enumerate(offsets.flatten().tolist()):
        expected = sum(math.cos(offset * float(theta[i])) for i in range(3, 8)) / 5
        assert math.isclose(float(ours.flatten()[n]), expected, abs_tol=1e-12)


# -- RoPE-Mixed ------------------------------------------------------------------------


def _dense_mixed(x, positions, freqs, layout):
    """Each row times the rotation whose pair-i angle is the dot product, entry by entry."""
    dim = x.shape[-1]
    out = torch.empty_like(x)
    for n in range(x.shape[-2]):
        rotation = torch.zeros(dim, dim, dtype=torch.float64)
        for i, (a, b) in enumerate(_pair_features(dim, layout)):
            angle = sum(float(positions[axis, n]) * float(freqs[axis, i])
                        for axis in range(freqs.shape[0]))
            rotation[a, a], rotation[a, b] = math.cos(angle), -math.sin(angle)
            rotation[b, a], rotation[b, b] = math.sin(angle), math.cos(angle)
        out[..., n, :] = x[..., n, :] @ rotation.T
    return out


@pytest.mark.parametrize("layout", ["half", "interleaved"])
@pytest.mark.parametrize("n_axes", [1, 2, 3])
def test_mixed_rope_matches_dense(layout, n_axes, generator):
    freqs = torch.randn(n_axes, 8, generator=generator, dtype=torch.float64)
    positions = torch.randint(-40, 40, (n_axes, 7), generator=generator)
    x = torch.randn(2, 7, 16, generator=generator, dtype=torch.float64)
    ours = multidim.apply_mixed_rope(x, positions, freqs, layout=layout)
    assert torch.allclose(ours, _dense_mixed(x, positions, freqs, layout), atol=1e-12)


def test_mixed_frequencies_follow_the_paper_initialisation():
    """Magnitudes base**(-4k/dim); directions a and a + pi/2 (Heo et al. 2024, sec. 3)."""
    dim, base, a = 24, 10.0, 1.1
    freqs = multidim.mixed_frequencies(dim, base, angle=a, dtype=torch.float64)
    for k in range(dim // 4):
        r = base ** (-4 * k / dim)
        for i, direction in ((k, a), (dim // 4 + k, a + math.pi / 2)):
            assert math.isclose(float(freqs[1, i]), r * math.cos(direction), abs_tol=1e-15)
            assert math.isclose(float(freqs[0, i]), r * math.sin(direction), abs_tol=1e-15)


def test_mixed_rope_at_angle_zero_is_axial_rope(generator):
    dim = 32
    grid = multidim.grid_positions((5, 7))
    x = torch.randn(grid.shape[1], dim, generator=generator, dtype=torch.float64)
    freqs = multidim.mixed_frequencies(dim, 100.0, angle=0.0, dtype=torch.float64)
    axis = torch.tensor([1] * (dim // 4) + [0] * (dim // 4))   # x first, then y
    f = multidim.axial_inv_freq(axis, 100.0, dtype=torch.float64)
    axial = multidim.apply_multiaxis_rope(x, grid, f, axis, layout="interleaved")
    assert torch.allclose(multidim.apply_mixed_rope(x, grid, freqs), axial, atol=1e-12)
    assert torch.equal(multidim.frequency_vectors(f, axis, 2), freqs)


@settings(max_examples=25, deadline=None, derandomize=True)
@given(angle=st.floats(0, 2 * math.pi), shift=st.tuples(st.integers(-10**4, 10**4),
                                                        st.integers(-10**4, 10**4)))
def test_mixed_scores_depend_only_on_the_offset(angle, shift):
    generator = torch.Generator().manual_seed(7)
    freqs = multidim.mixed_frequencies(16, 10.0, angle=angle, dtype=torch.float64)
    grid = multidim.grid_positions((3, 4))
    q = torch.randn(12, 16, generator=generator, dtype=torch.float64)
    k = torch.randn(12, 16, generator=generator, dtype=torch.float64)

    def scores(p):
        return (multidim.apply_mixed_rope(q, p, freqs)
                @ multidim.apply_mixed_rope(k, p, freqs).T)

    moved = grid + torch.tensor(shift)[:, None]
    # angles up to ~1.4e4 rad in float64: errors ~1.4e4 * 2**-52 per pair, summed
    assert torch.allclose(scores(moved), scores(grid), atol=1e-8)



# -- validation -----------------------------------------------------------------------


@pytest.mark.parametrize("call, match", [
    (lambda: multidim.mrope_axis_map([16, 24, 20], dim=128), r"sections must sum to dim/2 = 64"),
    (lambda: multidim.mrope_axis_map([16, -1, 24]), r"sections\[1\] must be >= 0"),
    (lambda: multidim.mrope_axis_map([]), "at least one pair"),
    (lambda: multidim.mrope_axis_map("tw"), "sections must be a sequence"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(3, 4),
                                           rope.inv_freq(8), multidim.mrope_axis_map([1, 1, 1])),
     r"axis_of_freq has 3 entries.*sections must sum to dim/2"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(3, 4),
                                           rope.inv_freq(8), torch.tensor([0, 1, 2, 3])),
     r"axis_of_freq entry 3 >= n_axes = 3"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                           rope.inv_freq(8), torch.tensor([0, 1, -1, 1])),
     r"axis_of_freq entries must be >= 0"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                           rope.inv_freq(8), torch.tensor([0.0, 1, 0, 1])),
     "axis_of_freq must be an integer tensor"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.arange(4),
                                           rope.inv_freq(8), torch.zeros(4, dtype=torch.long)),
     r"positions must be \(n_axes, \.\.\., seq\)"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(2, 5),
                                           rope.inv_freq(8), torch.zeros(4, dtype=torch.long)),
     "do not broadcast"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                           rope.inv_freq(6), torch.zeros(4, dtype=torch.long)),
     r"inv_freq must have shape \(dim/2,\) = \(4,\)"),
    (lambda: multidim.apply_multiaxis_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                           rope.inv_freq(8), torch.zeros(4, dtype=torch.long),
                                           layout="neox"), "layout must be one of"),
    (lambda: multidim.mrope_position_ids([("text", 3), ("image", (1, 5, 4))]),
     r"segments\[1\].*not divisible by spatial_merge_size = 2"),
    (lambda: multidim.mrope_position_ids([("video", (2, 6, 6))], spatial_merge_size=4),
     r"segments\[0\].*not divisible by spatial_merge_size = 4"),
    (lambda: multidim.mrope_position_ids([("audio", 3)]), r"segments\[0\] kind must be one of"),
    (lambda: multidim.mrope_position_ids([("text", 0)]), r"segments\[0\] n_tokens must be >= 1"),
    (lambda: multidim.mrope_position_ids([("image", (1, 4))]), r"grid \(t, h, w\)"),
    (lambda: multidim.mrope_position_ids([]), "non-empty"),
    (lambda: multidim.mrope_position_ids([("video", (2, 4, 4))], seconds_per_grid=1.0),
     "must be given together"),
    (lambda: multidim.mrope_position_ids([("video", (2, 4, 4))], seconds_per_grid=[1.0, 2.0],
                                         tokens_per_second=2), "one value per video"),
    (lambda: multidim.mrope_position_ids([("video", (2, 4, 4))], seconds_per_grid=0.0,
                                         tokens_per_second=2), r"seconds_per_grid\[0\] must be > 0"),
    (lambda: multidim.grid_positions((3, 0)), r"shape\[1\] must be >= 1"),
    (lambda: multidim.videorope_axis_map([16, 24]), "three pair counts"),
    (lambda: multidim.videorope_axis_map([16, 24, 20]), "same number of pairs"),
    (lambda: multidim.videorope_axis_map([16, 24, 24], dim=100),
     r"sections must sum to dim/2 = 50"),
    (lambda: multidim.videorope_position_ids([("video", (2, 4, 4))], temporal_spacing=0),
     "temporal_spacing must be > 0"),
    (lambda: multidim.videorope_position_ids([("image", (1, 3, 4))]),
     "not divisible by spatial_merge_size"),
    (lambda: multidim.axis_kernel([1.0], rope.inv_freq(8), torch.tensor([0, 0, 1, 1]), 2),
     "axis 2 drives no pair"),
    (lambda: multidim.mixed_frequencies(18), "dim must be a multiple of 4"),
    (lambda: multidim.mixed_frequencies(16, angle=float("nan")), "angle must be finite"),
    (lambda: multidim.mixed_frequencies(16, base=1.0), "base must be > 1"),
    (lambda: multidim.apply_mixed_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                       torch.zeros(2, 3)), r"freqs must have shape"),
    (lambda: multidim.apply_mixed_rope(torch.randn(4, 8), torch.zeros(3, 4),
                                       torch.zeros(2, 4)), "positions has 3 axes"),
    (lambda: multidim.apply_mixed_rope(torch.randn(4, 8), torch.zeros(2, 5),
                                       torch.zeros(2, 4)), "do not broadcast"),
    (lambda: multidim.apply_mixed_rope(torch.randn(4, 8), torch.zeros(2, 4),
                                       torch.zeros(2, 4), layout="neox"),
     "layout must be one of"),
    (lambda: multidim.frequency_vectors(rope.inv_freq(8), torch.tensor([0, 1, 2, 0]), 2),
     r"axis_of_freq entry 2 >= n_axes = 2"),
])
def test_validation(call, match):
    with pytest.raises(ValueError, match=match):
        call()
