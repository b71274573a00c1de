"""CacheSpec: the layout math (SPEC.md section 2), validation and serialization."""

from __future__ import annotations

import json

import pytest
import torch

from fp8check.core.spec import CacheSpec, Coordinate, FP8Format, Layout, Region, ScaleFormat, SpecError
from conftest import aiter_shuffle


def aiter_shuffled_ids(block_size: int, head_dim: int) -> torch.Tensor:
    """Block-flat byte position -> token * head_dim + dim, made the way aiter's shuffle_weight with
    layout (16, 16) rearranges an fp8 [N, D] tensor (conftest.aiter_shuffle)."""
    return aiter_shuffle(torch.arange(block_size * head_dim, dtype=torch.int64).view(block_size, head_dim)).view(-1)


def index_from_positions(ids_at_position: torch.Tensor, block_size: int, head_dim: int) -> torch.Tensor:
    """Invert position -> id into [token, dim] -> position."""
    index = torch.empty(block_size * head_dim, dtype=torch.int64)
    index[ids_at_position] = torch.arange(ids_at_position.numel())
    return index.view(block_size, head_dim)


SHUFFLE_SHAPES = [(16, 32), (16, 64), (32, 32), (64, 128), (48, 96), (128, 64)]


@pytest.mark.parametrize("block_size, head_dim", SHUFFLE_SHAPES)
def test_shuffle_value_index_is_aiter_shuffle_weight(block_size, head_dim):
    spec = CacheSpec(block_size=block_size, head_dim=head_dim, quant_block_size=head_dim, layout=Layout.SHUFFLE)
    expected = index_from_positions(aiter_shuffled_ids(block_size, head_dim), block_size, head_dim)
    assert torch.equal(spec.value_index(), expected)


@pytest.mark.parametrize("block_size, head_dim", SHUFFLE_SHAPES)
def test_shuffle_value_offset_is_aiter_shuffle_weight(block_size, head_dim):
    spec = CacheSpec(block_size=block_size, head_dim=head_dim, quant_block_size=head_dim, layout=Layout.SHUFFLE)
    ids = aiter_shuffled_ids(block_size, head_dim).tolist()
    assert [spec.value_offset(i // head_dim, i % head_dim) for i in ids] == list(range(len(ids)))


@pytest.mark.parametrize("block_size, head_dim", [(1, 16), (3, 48), (16, 32), (64, 128)])
def test_linear_value_index_is_row_major(block_size, head_dim):
    spec = CacheSpec(block_size=block_size, head_dim=head_dim, quant_block_size=16, layout=Layout.LINEAR)
    row_major = torch.arange(block_size * head_dim).view(block_size, head_dim)
    assert torch.equal(spec.value_index(), row_major)
    assert [spec.value_offset(t, d) for t in range(block_size) for d in range(head_dim)] == row_major.view(-1).tolist()


def test_shuffle_offsets_hand_derived():
    # block 64, head_dim 128: tile of 16 tokens = 16*128 = 2048 bytes, 16-dim column = 256 bytes.
    spec = CacheSpec(block_size=64, head_dim=128, quant_block_size=128)
    assert spec.value_offset(0, 0) == 0
    assert spec.value_offset(0, 15) == 15
    assert spec.value_offset(0, 16) == 256  # next 16-dim column
    assert spec.value_offset(1, 0) == 16  # next token inside the tile
    assert spec.value_offset(15, 15) == 15 * 16 + 15
    assert spec.value_offset(16, 0) == 2048  # next 16-token tile
    assert spec.value_offset(63, 127) == 3 * 2048 + 7 * 256 + 15 * 16 + 15 == 8191
    # scales follow the 8192 value bytes, 4 bytes per (token, group), one group per token here
    assert spec.scale_offset(0, 0) == 8192
    assert spec.scale_offset(63, 0) == 8192 + 4 * 63
    assert spec.block_bytes == 64 * 132


def test_scale_offsets_with_several_groups():
    # head_dim 64, qbs 16 -> 4 groups: token t group j at value_bytes + 4*(4t + j)
    spec = CacheSpec(block_size=16, head_dim=64, quant_block_size=16)
    assert spec.groups_per_token == 4
    assert spec.value_bytes == 1024 and spec.scale_bytes == 4 * 16 * 4
    assert spec.row_bytes == 64 + 16 and spec.block_bytes == 16 * 80
    assert spec.scale_offset(0, 3) == 1024 + 12
    assert spec.scale_offset(5, 2) == 1024 + 4 * (20 + 2)


LOCATE_SPECS = [
    CacheSpec(num_blocks=2, block_size=16, head_dim=32, quant_block_size=16),
    CacheSpec(num_blocks=2, block_size=32, head_dim=64, quant_block_size=32),
    CacheSpec(num_blocks=2, block_size=16, head_dim=48, quant_block_size=48),  # shuffle, D % 32 != 0
    CacheSpec(num_blocks=2, block_size=5, head_dim=32, quant_block_size=8, layout=Layout.LINEAR),
    CacheSpec(num_blocks=3, block_size=1, head_dim=16, quant_block_size=16),
    CacheSpec(num_blocks=2, block_size=5, head_dim=32, quant_block_size=8, layout=Layout.INTERLEAVED),
    CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=64, layout=Layout.INTERLEAVED),
]


@pytest.mark.parametrize("spec", LOCATE_SPECS, ids=lambda s: s.summary())
def test_locate_inverts_value_and_scale_offsets_for_every_byte(spec):
    seen = {}
    for block in range(spec.num_blocks):
        base = block * spec.block_bytes
        for token in range(spec.block_size):
            for dim in range(spec.head_dim):
                byte = spec.value_offset(token, dim)
                seen[base + byte] = Coordinate(block, Region.VALUE, token, dim, None, byte)
            for group in range(spec.groups_per_token):
                for i in range(4):
                    byte = spec.scale_offset(token, group) + i
                    seen[base + byte] = Coordinate(block, Region.SCALE, token, None, group, byte)
    # the offsets cover every byte of every block exactly once (no padding at these shapes)
    assert sorted(seen) == list(range(spec.num_blocks * spec.block_bytes))
    for flat_index, coordinate in seen.items():
        assert spec.locate(flat_index) == coordinate


def test_locate_value_region_stays_below_scale_region():
    spec = CacheSpec(block_size=16, head_dim=32, quant_block_size=32)
    assert spec.locate(spec.value_bytes - 1).region is Region.VALUE
    assert spec.locate(spec.value_bytes).region is Region.SCALE
    assert spec.locate(spec.block_bytes).block == 1
    assert spec.locate(spec.block_bytes).byte_in_block == 0


def test_coordinate_describe_names_the_place():
    spec = CacheSpec(block_size=64, head_dim=128, quant_block_size=128)
    # block 1, token 17 (tile 1, row 1), dim 40 (column 2, lane 8): 2048 + 512 + 16 + 8 = 2584
    coordinate = spec.locate(spec.block_bytes + 2584)
    assert coordinate.describe() == "block 1, token 17, dim 40 (value region, byte 2584)"
    coordinate = spec.locate(8192 + 4 * 3 + 1)
    assert coordinate.describe() == "block 0, token 3, scale group 0 (scale region, byte 8205)"


def test_default_layout_follows_block_size():
    assert CacheSpec(block_size=64).layout is Layout.SHUFFLE
    assert CacheSpec(block_size=16).layout is Layout.SHUFFLE
    assert CacheSpec(block_size=1).layout is Layout.LINEAR
    assert CacheSpec(block_size=64, layout=Layout.LINEAR).layout is Layout.LINEAR


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"block_size": 15}, "block_size"),  # default layout shuffle needs % 16
        ({"block_size": 24, "layout": Layout.SHUFFLE}, "block_size"),
        ({"block_size": 1, "layout": Layout.SHUFFLE}, "block_size"),
        ({"head_dim": 40, "quant_block_size": 8}, "head_dim"),
        ({"head_dim": 8, "quant_block_size": 8}, "head_dim"),
        ({"head_dim": 128, "quant_block_size": 48}, "quant_block_size"),
        ({"head_dim": 64, "quant_block_size": 128}, "quant_block_size"),
        ({"num_blocks": 0}, "num_blocks"),
        ({"num_blocks": -2}, "num_blocks"),
        ({"block_size": 0}, "block_size"),
        ({"block_size": -16}, "block_size"),
        ({"head_dim": 0}, "head_dim"),
        ({"head_dim": -128}, "head_dim"),
        ({"quant_block_size": 0}, "quant_block_size"),
        ({"quant_block_size": -128}, "quant_block_size"),
        ({"num_blocks": 2.0}, "num_blocks"),
        ({"block_size": True}, "block_size"),
    ],
)
def test_rejected_specs_raise_one_line_naming_the_field(changes, field):
    with pytest.raises(SpecError) as info:
        CacheSpec(**changes)
    message = str(info.value)
    assert "\n" not in message
    assert field in message


def test_shuffle_rejection_suggests_linear_and_linear_accepts_it():
    with pytest.raises(SpecError, match="use --layout linear"):
        CacheSpec(block_size=15)
    assert CacheSpec(block_size=15, layout=Layout.LINEAR).value_bytes == 15 * 128


ROUND_TRIP_SPECS = [
    CacheSpec(),
    CacheSpec(num_blocks=7, block_size=1, head_dim=64, quant_block_size=32, fp8=FP8Format.E4M3FNUZ,
              scale_fmt=ScaleFormat.FP32),
    CacheSpec(block_size=32, layout=Layout.LINEAR),
]


@pytest.mark.parametrize("spec", ROUND_TRIP_SPECS, ids=lambda s: s.summary())
def test_to_dict_from_dict_round_trip(spec):
    data = spec.to_dict()
    assert json.loads(json.dumps(data)) == data  # plain JSON types only
    assert CacheSpec.from_dict(data) == spec
    assert CacheSpec.from_dict(json.loads(spec.to_json())) == spec


def test_to_dict_spells_enums_by_value():
    spec = CacheSpec(num_blocks=2, block_size=16, head_dim=64, quant_block_size=16, fp8=FP8Format.E4M3FNUZ)
    assert spec.to_dict() == {
        "num_blocks": 2, "block_size": 16, "head_dim": 64, "quant_block_size": 16,
        "fp8": "e4m3fnuz", "scale_fmt": "ue8m0", "layout": "shuffle",
    }


@pytest.mark.parametrize(
    "changes",
    [{"fp8": "e5m2"}, {"layout": "tiled"}, {"scale_fmt": None}, {"block_size": 15}, {"head_dim": "128"}],
)
def test_from_dict_rejects_malformed_data(changes):
    data = {**CacheSpec().to_dict(), **changes}
    with pytest.raises(SpecError) as info:
        CacheSpec.from_dict(data)
    assert "\n" not in str(info.value)


def test_from_dict_rejects_missing_key():
    data = CacheSpec().to_dict()
    del data["head_dim"]
    with pytest.raises(SpecError, match="head_dim"):
        CacheSpec.from_dict(data)


# ---- interleaved (per token [values | scales]) and ue8m0x4 ------------------------------------------------


def test_interleaved_offsets_hand_derived():
    # head_dim 128, one group: each token is one 132-byte record, its scale right after its values
    spec = CacheSpec(block_size=64, layout=Layout.INTERLEAVED)
    assert spec.value_offset(0, 0) == 0 and spec.value_offset(0, 127) == 127
    assert spec.scale_offset(0, 0) == 128 and spec.value_offset(1, 0) == 132
    assert spec.scale_offset(63, 0) == 63 * 132 + 128 and spec.block_bytes == 64 * 132
    assert spec.locate(131) == Coordinate(0, Region.SCALE, 0, None, 0, 131)
    assert spec.locate(8448 + 133) == Coordinate(1, Region.VALUE, 1, 1, None, 133)


@pytest.mark.parametrize("head_dim, qbs", [(128, 128), (64, 16)])
def test_interleaved_is_linear_at_block_size_one(head_dim, qbs):
    linear, interleaved = (CacheSpec(block_size=1, head_dim=head_dim, quant_block_size=qbs, layout=layout)
                           for layout in (Layout.LINEAR, Layout.INTERLEAVED))
    assert torch.equal(linear.value_index(), interleaved.value_index())
    assert torch.equal(linear.scale_index(), interleaved.scale_index())
    blocky = CacheSpec(block_size=8, head_dim=head_dim, quant_block_size=qbs, layout=Layout.LINEAR)
    assert not torch.equal(blocky.replace(layout=Layout.LINEAR).scale_index(),
                           blocky.replace(layout=Layout.INTERLEAVED).scale_index())


def test_interleaved_block_is_block_size_one_blocks_back_to_back():
    # the reference writer's interleaved cache of 3 blocks x 64 holds the bytes of its linear cache of 192 x 1
    from fp8check.core.cache import CacheBuffer
    from fp8check.core.inputs import generate
    from fp8check.core.reference import aiter_writer

    interleaved = CacheSpec(num_blocks=3, layout=Layout.INTERLEAVED)
    per_token = CacheSpec(num_blocks=192, block_size=1)
    data = generate(interleaved, seed=3)
    caches = []
    for spec in (interleaved, per_token):
        buffer = CacheBuffer.allocate(spec, "cpu")
        aiter_writer(data.k, buffer.cache, data.slot_mapping, 128, "ue8m0", layout=spec.layout.value)
        caches.append(buffer.flat.reshape(-1))
    assert torch.equal(caches[0], caches[1])


def test_ue8m0x4_words_are_four_biased_exponents():
    from fp8check.core.fp8 import decode_scales, encode_scales

    scales = torch.tensor([2.0**-7, 2.0**-22, 1.0, 2.0**10, float("nan"), float("inf")])
    words = encode_scales(scales, ScaleFormat.UE8M0X4)
    expected = [0x78, 127 - 22, 0x7F, 127 + 10, 0xFF, 0xFF]
    assert words.tolist() == [[b] * 4 for b in expected]  # 0x78787878 is 2^-7 (vLLM's mxfp8)
    back = decode_scales(words, ScaleFormat.UE8M0X4)
    assert back[:4].tolist() == scales[:4].tolist() and torch.isnan(back[4:]).all()
    assert ScaleFormat.UE8M0X4.writer_arg == "mxfp8" and ScaleFormat.from_writer_arg("mxfp8") is ScaleFormat.UE8M0X4


def test_word_start_names_the_scale_word_of_a_byte():
    for layout in (Layout.LINEAR, Layout.INTERLEAVED):
        spec = CacheSpec(block_size=4, head_dim=32, quant_block_size=16, layout=layout)
        for token in range(4):
            for group in range(2):
                start = spec.scale_offset(token, group)
                assert [spec.word_start(start + i) for i in range(4)] == [start] * 4
            assert spec.word_start(spec.value_offset(token, 5)) == spec.value_offset(token, 5)
