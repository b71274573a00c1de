"""diff_caches: counts per block and region, and the exact coordinate of a planted difference."""

from __future__ import annotations

import struct

import pytest
import torch

from fp8check.core import inputs
from fp8check.producers import registry as producers
from fp8check.core.cache import CacheBuffer, guard_bytes
from fp8check.core.diff import diff_caches
from fp8check.core.spec import CacheSpec, FP8Format, Region

# block 32, head_dim 64, qbs 32: value region 32*64 = 2048 bytes, then 32 tokens * 2 groups * 4 = 256
# scale bytes; block_bytes = 32 * (64 + 8) = 2304.
SPEC = CacheSpec(num_blocks=3, block_size=32, head_dim=64, quant_block_size=32)


@pytest.fixture(scope="module")
def written() -> CacheBuffer:
    data = inputs.generate(SPEC, seed=11)
    return producers.run(producers.resolve("reference"), SPEC, data, torch.device("cpu"))


def copy(buffer: CacheBuffer) -> CacheBuffer:
    return CacheBuffer(buffer.spec, buffer.buffer.clone())


def fp8_value(byte: int, fmt: FP8Format) -> float:
    return torch.tensor([byte], dtype=torch.uint8).view(fmt.torch_dtype()).item()


def scale_value(block_bytes: torch.Tensor, first: int) -> float:
    return struct.unpack("<f", bytes(block_bytes[first : first + 4].tolist()))[0]


def flip(buffer: CacheBuffer, block: int, byte: int) -> tuple[int, int]:
    """Flip the low bit of one cache byte -> (old byte, new byte)."""
    old = int(buffer.flat[block, byte])
    buffer.flat[block, byte] = old ^ 0x01
    return old, old ^ 0x01


def test_identical_caches(written):
    result = diff_caches(SPEC, written, copy(written))
    assert result.identical
    assert result.first_mismatch is None
    assert result.diff_bytes == 0 and result.guard_diff == 0
    assert [(b.block, b.value_diff, b.value_total, b.scale_diff, b.scale_total) for b in result.all_rows()] == [
        (i, 0, 2048, 0, 256) for i in range(3)
    ]
    assert result.total_bytes == 3 * 2304


# (block, byte in block, token, dim, group, region), each derived by hand from SPEC.md's layout:
# value byte = (t//16)*16*64 + (d//16)*256 + (t%16)*16 + d%16; scale byte = 2048 + 4*(2t + j) + i.
PLANTED = [
    (0, 0, 0, 0, None, Region.VALUE),  # the first byte of the cache
    (1, 1589, 19, 37, None, Region.VALUE),  # t 19 d 37: 1024 + 2*256 + 3*16 + 5 = 1589
    (2, 2047, 31, 63, None, Region.VALUE),  # 1024 + 3*256 + 15*16 + 15 = 2047: last value byte
    (1, 2110, 7, None, 1, Region.SCALE),  # t 7 group 1, third byte: 2048 + 4*15 + 2 = 2110
    (0, 2048, 0, None, 0, Region.SCALE),  # first scale byte
    (2, 2303, 31, None, 1, Region.SCALE),  # last byte of the last block: 2048 + 4*63 + 3
]


@pytest.mark.parametrize("block, byte, token, dim, group, region", PLANTED)
def test_one_planted_byte_is_found_at_its_coordinate(written, block, byte, token, dim, group, region):
    candidate = copy(written)
    old, new = flip(candidate, block, byte)
    result = diff_caches(SPEC, written, candidate)

    assert not result.identical
    assert result.diff_bytes == 1 and result.guard_diff == 0
    counts = [(b.value_diff, b.scale_diff) for b in result.all_rows()]
    expected = [(0, 0)] * 3
    expected[block] = (1, 0) if region is Region.VALUE else (0, 1)
    assert counts == expected

    m = result.first_mismatch
    c = m.coordinate
    assert (c.block, c.region, c.token, c.dim, c.group, c.byte_in_block) == (block, region, token, dim, group, byte)
    assert (m.baseline_byte, m.candidate_byte) == (old, new)
    assert m.fp8 == "e4m3fn"
    if region is Region.VALUE:
        assert (m.baseline_value, m.candidate_value) == (fp8_value(old, SPEC.fp8), fp8_value(new, SPEC.fp8))
    else:
        first = 2048 + 4 * (2 * token + group)
        assert m.baseline_value == scale_value(written.flat[block], first)
        assert m.candidate_value == scale_value(candidate.flat[block], first)
        assert m.baseline_value != m.candidate_value


def test_planted_value_byte_is_the_written_token(written):
    # The planted coordinate names the token and dim the writer put there: the un-flipped byte is the
    # reference quantization of k[19 + 32, 37] (sequential slots: token i -> slot i).
    from fp8check.core import reference

    data = inputs.generate(SPEC, seed=11)
    codes, _ = reference.quantize(
        data.k, profile=reference.AITER, fmt=SPEC.fp8, scale_fmt=SPEC.scale_fmt, quant_block_size=32
    )
    candidate = copy(written)
    old, _ = flip(candidate, 1, 1589)
    assert old == int(codes[32 + 19, 37])
    assert diff_caches(SPEC, written, candidate).first_mismatch.coordinate.token == 19


def test_first_mismatch_is_the_earliest_in_cache_order(written):
    candidate = copy(written)
    flip(candidate, 2, 5)
    flip(candidate, 1, 2110)
    flip(candidate, 1, 1589)
    result = diff_caches(SPEC, written, candidate)
    assert result.diff_bytes == 3
    assert [(b.value_diff, b.scale_diff) for b in result.all_rows()] == [(0, 0), (1, 1), (1, 0)]
    c = result.first_mismatch.coordinate
    assert (c.block, c.byte_in_block, c.token, c.dim) == (1, 1589, 19, 37)


@pytest.mark.parametrize("position", [0, guard_bytes(SPEC) - 1, -guard_bytes(SPEC), -1])
def test_guard_byte_write_is_counted_outside_the_blocks(written, position):
    candidate = copy(written)
    candidate.buffer[position] ^= 0x01
    result = diff_caches(SPEC, written, candidate)
    assert result.guard_diff == 1
    assert result.diff_bytes == 1
    assert not result.identical
    assert all(b.diff == 0 for b in result.all_rows())
    assert result.first_mismatch is None  # a stray write has no cache coordinate


def test_every_byte_differs_counts_full_regions(written):
    candidate = copy(written)
    candidate.flat.bitwise_xor_(0xFF)
    result = diff_caches(SPEC, written, candidate)
    assert [(b.value_diff, b.scale_diff) for b in result.all_rows()] == [(2048, 256)] * 3
    assert result.diff_bytes == result.total_bytes == 3 * 2304
    assert result.guard_diff == 0


def test_mismatch_to_dict_and_describe(written):
    candidate = copy(written)
    old, new = flip(candidate, 1, 1589)
    m = diff_caches(SPEC, written, candidate).first_mismatch
    assert m.to_dict() == {
        "block": 1, "token": 19, "dim": 37, "scale_group": None, "region": "value", "byte_in_block": 1589,
        "baseline_byte": f"0x{old:02x}", "candidate_byte": f"0x{new:02x}",
        "baseline_value": fp8_value(old, SPEC.fp8), "candidate_value": fp8_value(new, SPEC.fp8), "fp8": "e4m3fn",
    }
    text = m.describe()
    assert text.startswith("block 1, token 19, dim 37 (value region, byte 1589): ")
    assert f"baseline 0x{old:02x}" in text and f"candidate 0x{new:02x}" in text


@pytest.mark.parametrize("shape, cols", [((7, 8448), slice(0, 8192)), ((7, 8448), slice(8192, 8448)),
                                         ((5, 132), slice(0, 128)), ((3, 4100), slice(4, 4100)), ((4, 13), slice(0, 13))])
def test_count_true_matches_count_nonzero_on_slices(shape, cols):
    # Rows up to 8192 bools (lanes would overflow without chunking), unaligned slices, odd widths.
    g = torch.Generator().manual_seed(0)
    mask = torch.rand(shape, generator=g) < 0.9
    mask[0] = True  # a full row: every lane at its maximum
    from fp8check.core.diff import count_true

    assert torch.equal(count_true(mask[:, cols]), torch.count_nonzero(mask[:, cols], dim=1))


def test_interleaved_counts_values_and_scales_where_they_lie():
    # per-token records: token 3's scale word sits at 3 * 132 + 128, its dim 5 at 3 * 132 + 5
    from fp8check.core.cache import CacheBuffer
    from fp8check.core.diff import diff_caches
    from fp8check.core.inputs import generate
    from fp8check.core.spec import CacheSpec, Layout, Region
    from fp8check.core.reference import aiter_writer

    spec = CacheSpec(num_blocks=2, layout=Layout.INTERLEAVED)
    data = generate(spec, seed=1)
    base, cand = CacheBuffer.allocate(spec, "cpu"), CacheBuffer.allocate(spec, "cpu")
    for buffer in (base, cand):
        aiter_writer(data.k, buffer.cache, data.slot_mapping, 128, "ue8m0", layout="interleaved")
    cand.flat[1, 3 * 132 + 5] ^= 0x01
    cand.flat[1, 3 * 132 + 130] ^= 0x10
    d = diff_caches(spec, base, cand)
    assert d.value_diff.tolist() == [0, 1] and d.scale_diff.tolist() == [0, 1] and d.diff_bytes == 2
    first = d.first_mismatch.coordinate
    assert (first.block, first.region, first.token, first.dim) == (1, Region.VALUE, 3, 5)
    assert d.block(1).value_total == 64 * 128 and d.block(1).scale_total == 64 * 4


def test_scales_one_ulp_apart_never_print_alike():
    from fp8check.core.diff import Mismatch
    from fp8check.core.spec import Coordinate, Region

    a = struct.unpack("<f", struct.pack("<I", 0x3B949249))[0]
    b = struct.unpack("<f", struct.pack("<I", 0x3B949248))[0]
    m = Mismatch(Coordinate(0, Region.SCALE, 0, None, 0, 8192), 0x49, 0x48, a, b, "e4m3fn")
    text = m.describe()
    assert f"fp32 scale {a:.9g}" in text and f"fp32 scale {b:.9g}" in text and f"{a:.9g}" != f"{b:.9g}"
