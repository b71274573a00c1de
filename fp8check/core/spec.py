"""The one description of an indexer K cache: formats, layout and all byte math (docs/NUMERICS.md)."""

from __future__ import annotations

import dataclasses
import enum
import json
from dataclasses import dataclass
from typing import Any

from .errors import SpecError

SCALE_FLOOR = 1e-4  # s = max(amax, 1e-4) / DIV in every real writer
# The farthest two FP8 codes may be apart and still be excused. Real writers differ by 1 code (rounding)
# or a doubled scale (docs/NUMERICS.md); 8 leaves room for that while a NaN against a number (255
# apart) or the seed's integer conversion can never be excused.
MAX_CODE_DISTANCE = 8  # the largest --max-code-distance budget


class FP8Format(enum.Enum):
    E4M3FN = "e4m3fn"
    E4M3FNUZ = "e4m3fnuz"

    @property
    def max(self) -> float:
        return 448.0 if self is FP8Format.E4M3FN else 240.0

    @property
    def vllm_divisor(self) -> float:
        """DIV of vLLM's writers: 448 on e4m3fn; on e4m3fnuz its ROCm writers divide by 224, not the format's max
        240 (the aiter op uses `max`; docs/NUMERICS.md)."""
        return self.max if self is FP8Format.E4M3FN else 224.0

    @property
    def bias(self) -> int:
        return 7 if self is FP8Format.E4M3FN else 8

    @property
    def nan_code(self) -> int:
        return 0x7F if self is FP8Format.E4M3FN else 0x80

    def torch_dtype(self):
        import torch

        return {FP8Format.E4M3FN: torch.float8_e4m3fn, FP8Format.E4M3FNUZ: torch.float8_e4m3fnuz}[self]

    @classmethod
    def from_torch_dtype(cls, dtype) -> "FP8Format":
        for fmt in cls:
            if fmt.torch_dtype() == dtype:
                return fmt
        raise SpecError(f"fp8_dtype {dtype}: the formats are {', '.join(str(f.torch_dtype()) for f in cls)}")


class ScaleFormat(enum.Enum):
    UE8M0 = "ue8m0"  # a power of two, stored as an fp32 word
    FP32 = "fp32"
    UE8M0X4 = "ue8m0x4"  # a power of two, stored as four equal UE8M0 bytes (vLLM's "mxfp8": 0x78787878 is 2^-7)

    @property
    def writer_arg(self) -> str | None:
        """What the de-facto writer signature takes as `scale_fmt` (vLLM's CUDA op: "mxfp8" for UE8M0X4)."""
        return {ScaleFormat.UE8M0: "ue8m0", ScaleFormat.UE8M0X4: "mxfp8", ScaleFormat.FP32: None}[self]

    @classmethod
    def from_writer_arg(cls, arg: str | None) -> "ScaleFormat":
        return {"ue8m0": cls.UE8M0, "mxfp8": cls.UE8M0X4}.get(arg, cls.FP32)

    @property
    def power_of_two(self) -> bool:
        """Scales rounded up to a power of two: s = 2 ** ceil(log2(s))."""
        return self is not ScaleFormat.FP32


class Layout(enum.Enum):
    SHUFFLE = "shuffle"  # planar, aiter's 16x16 tiles in the value region
    LINEAR = "linear"  # planar: all values of the block, then all scales
    INTERLEAVED = "interleaved"  # per token [head_dim values | its scales]; equal to LINEAR at block_size 1

    @property
    def planar(self) -> bool:
        """Values region, then scales region (docs/NUMERICS.md)."""
        return self is not Layout.INTERLEAVED


def default_layout(block_size: int) -> Layout:
    """vLLM's rule for its ROCm writer: SHUFFLE when block_size > 1, LINEAR when 1."""
    return Layout.SHUFFLE if block_size > 1 else Layout.LINEAR


class Region(enum.Enum):
    VALUE = "value"
    SCALE = "scale"


@dataclass(frozen=True)
class Coordinate:
    """Where one byte of the cache lives, in the domain's words."""

    block: int
    region: Region
    token: int
    dim: int | None  # value region: the head dim
    group: int | None  # scale region: the quant group
    byte_in_block: int

    def describe(self) -> str:
        where = f"dim {self.dim}" if self.region is Region.VALUE else f"scale group {self.group}"
        return f"block {self.block}, token {self.token}, {where} ({self.region.value} region, byte {self.byte_in_block})"


@dataclass(frozen=True)
class CacheSpec:
    num_blocks: int = 3
    block_size: int = 64
    head_dim: int = 128
    quant_block_size: int = 128
    fp8: FP8Format = FP8Format.E4M3FN
    scale_fmt: ScaleFormat = ScaleFormat.UE8M0
    layout: Layout | None = None  # None: shuffle when block_size > 1, linear when 1 (vLLM's rule)
    # > 1: the writer's cache is layer `layer` of a buffer [num_blocks, layers, block_bytes], handed over as a
    # strided view (per-layer views of one allocation); the other layers are poisoned and must stay so
    layers: int = 1

    def __post_init__(self) -> None:
        for name in ("num_blocks", "block_size", "head_dim", "quant_block_size", "layers"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise SpecError(f"{name} must be a positive integer, got {value!r}")
        if self.head_dim % 16:
            raise SpecError(f"head_dim must be a multiple of 16, got {self.head_dim}")
        if self.head_dim % self.quant_block_size:
            raise SpecError(f"quant_block_size {self.quant_block_size} must divide head_dim {self.head_dim}")
        if self.layout is None:
            object.__setattr__(self, "layout", default_layout(self.block_size))
        if self.layout is Layout.SHUFFLE and self.block_size % 16:
            raise SpecError(f"layout shuffle needs block_size % 16 == 0 (MFMA 16x16 tiles), got block_size"
                            f" {self.block_size}; use --layout linear")

    @property
    def groups_per_token(self) -> int:
        return self.head_dim // self.quant_block_size

    @property
    def row_bytes(self) -> int:
        """The allocation shape's last dim: head_dim + 4 * head_dim / qbs."""
        return self.head_dim + 4 * self.groups_per_token

    @property
    def value_bytes(self) -> int:
        return self.block_size * self.head_dim

    @property
    def scale_bytes(self) -> int:
        return 4 * self.block_size * self.groups_per_token

    @property
    def block_bytes(self) -> int:
        return self.block_size * self.row_bytes

    @property
    def num_slots(self) -> int:
        return self.num_blocks * self.block_size

    @property
    def layer(self) -> int:
        """The layer of a multi-layer buffer the writer is handed (the middle one: layers before and after)."""
        return self.layers // 2

    def value_offset(self, token, dim):
        """Byte of value (token, dim) inside its block (ints or int tensors; docs/NUMERICS.md)."""
        if self.layout is Layout.LINEAR:
            return token * self.head_dim + dim
        if self.layout is Layout.INTERLEAVED:
            return token * self.row_bytes + dim
        return (token // 16) * 16 * self.head_dim + (dim // 16) * 256 + (token % 16) * 16 + dim % 16

    def scale_offset(self, token, group):
        """First byte of the 4-byte scale word of (token, group) inside its block (ints or int tensors)."""
        if self.layout is Layout.INTERLEAVED:
            return token * self.row_bytes + self.head_dim + 4 * group
        return self.value_bytes + 4 * (token * self.groups_per_token + group)

    def locate(self, byte_in_cache: int) -> Coordinate:
        """Inverse of the byte math: a flat cache byte offset to its coordinate."""
        block, byte = divmod(int(byte_in_cache), self.block_bytes)
        if self.layout is Layout.INTERLEAVED:
            token, at = divmod(byte, self.row_bytes)
            if at < self.head_dim:
                return Coordinate(block, Region.VALUE, token, at, None, byte)
            return Coordinate(block, Region.SCALE, token, None, (at - self.head_dim) // 4, byte)
        if byte < self.value_bytes:
            if self.layout is Layout.LINEAR:
                token, dim = divmod(byte, self.head_dim)
            else:
                tile, rest = divmod(byte, 16 * self.head_dim)
                dtile, rest = divmod(rest, 256)
                t16, d16 = divmod(rest, 16)
                token, dim = tile * 16 + t16, dtile * 16 + d16
            return Coordinate(block, Region.VALUE, token, dim, None, byte)
        token, group = divmod((byte - self.value_bytes) // 4, self.groups_per_token)
        return Coordinate(block, Region.SCALE, token, None, group, byte)

    def value_index(self, device=None):
        """int64 [block_size, head_dim]: byte offset inside a block of every (token, dim)."""
        import torch

        return self.value_offset(torch.arange(self.block_size, device=device).view(-1, 1),
                                 torch.arange(self.head_dim, device=device).view(1, -1))

    def scale_index(self, device=None):
        """int64 [block_size * groups, 4]: byte offset inside a block of every scale word's bytes, in
        (token, group) order."""
        import torch

        t = torch.arange(self.block_size, device=device).repeat_interleave(self.groups_per_token)
        g = torch.arange(self.groups_per_token, device=device).repeat(self.block_size)
        return self.scale_offset(t, g).view(-1, 1) + torch.arange(4, device=device)

    @property
    def value_extent(self) -> int:
        """Bytes at the start of a block that hold all its values (and, interleaved, its scales between them)."""
        return self.value_bytes if self.layout.planar else self.block_bytes

    def value_part(self, blocks):
        """The value bytes of blocks [n, block_bytes] as [n, value_bytes] (a view when planar)."""
        if self.layout.planar:
            return blocks[:, : self.value_bytes]
        return blocks.reshape(-1, self.block_size, self.row_bytes)[:, :, : self.head_dim].reshape(blocks.shape[0], -1)

    def scale_words(self, blocks):
        """The scale words of blocks [n, block_bytes] as uint8 [n * block_size * groups, 4], in (token, group)
        order (a view when planar)."""
        if self.layout.planar:
            return blocks[:, self.value_bytes : self.value_bytes + self.scale_bytes].reshape(-1, 4)
        return blocks.reshape(-1, self.block_size, self.row_bytes)[:, :, self.head_dim :].reshape(-1, 4)

    def word_start(self, byte_in_block):
        """First byte of the scale word a scale byte belongs to; a value byte's own offset (ints or tensors)."""
        rel = byte_in_block - self.value_bytes if self.layout.planar else byte_in_block % self.row_bytes - self.head_dim
        return byte_in_block - rel % 4 * (rel >= 0)

    def to_dict(self) -> dict[str, Any]:
        out = {key: v.value if isinstance(v, enum.Enum) else v for key, v in dataclasses.asdict(self).items()}
        if self.layers == 1:  # a single-layer cache reads as it always has (records, goldens, JSON)
            del out["layers"]
        return out

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CacheSpec":
        try:
            return cls(data["num_blocks"], data["block_size"], data["head_dim"], data["quant_block_size"],
                       FP8Format(data["fp8"]), ScaleFormat(data["scale_fmt"]), Layout(data["layout"]),
                       data.get("layers", 1))
        except SpecError:
            raise
        except (KeyError, TypeError, ValueError) as exc:
            raise SpecError(f"malformed spec {data!r}: {exc}") from None

    def replace(self, **changes: Any) -> "CacheSpec":
        return dataclasses.replace(self, **changes)

    def summary(self) -> str:
        layers = f", layer {self.layer} of {self.layers} (strided view)" if self.layers > 1 else ""
        return (f"{self.num_blocks} blocks x {self.block_size} tokens, head_dim {self.head_dim},"
                f" qbs {self.quant_block_size}, {self.fp8.value}, scales {self.scale_fmt.value},"
                f" {self.layout.value} layout{layers}")


def default_quant_block_size(head_dim: int) -> int:
    """128 (DeepSeek-V3.2's group) where it divides head_dim, else one group per token."""
    return 128 if head_dim % 128 == 0 else head_dim
