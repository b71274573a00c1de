"""The C entry points appended to aiter's translation unit, one per form of the op's host function, so
that aiter's own host code (its checks, launch geometry and dtype dispatch) runs unchanged."""

from __future__ import annotations

import enum
import re
from dataclasses import dataclass


class Form(enum.Enum):
    """How a release declares `indexer_k_quant_and_cache`."""

    TENSOR_PRESHUFFLE = "aiter_tensor_t, preshuffle"  # 2026-04-30 on: torch-free, preshuffle keyword
    TORCH = "torch::Tensor, row-major"  # the PyPI 0.1.7 wheel and earlier: five arguments, ck_tile

    def detect(self, source: str) -> bool:
        signature = re.search(r"void\s+indexer_k_quant_and_cache\s*\(([^)]*)\)", source)
        params = signature.group(1) if signature else ""  # no declaration: neither form
        tensor = "aiter_tensor_t" if self.preshuffle else "torch::Tensor"
        return tensor in params and ("preshuffle" in params) == self.preshuffle

    @property
    def preshuffle(self) -> bool:
        return self is Form.TENSOR_PRESHUFFLE


@dataclass(frozen=True)
class Entry:
    source: str
    defines: tuple[str, ...]
    extra_includes: tuple[str, ...] = ()  # folders of the source tree besides csrc/include
    torch: bool = False  # builds against the installed PyTorch's headers and libraries


_SIGNATURE = """extern "C" __attribute__((visibility("default"))) int fp8check_indexer_k_quant_and_cache(
    void* k, void* kv_cache, void* slot_mapping, long num_tokens, long head_dim, long num_blocks, long block_size,
    long cache_stride, long quant_block_size, const char* scale_fmt, int preshuffle)"""

_TENSOR_ENTRY = _SIGNATURE + """
{
    aiter_tensor_t kt{}, ct{}, st{};
    kt.ptr = k; kt.ndim = 2; kt.shape[0] = num_tokens; kt.shape[1] = head_dim; kt.strides[0] = head_dim;
    kt.strides[1] = 1; kt.numel_ = num_tokens * head_dim; kt.dtype_ = AITER_DTYPE_bf16; kt.device_id = 0;
    ct.ptr = kv_cache; ct.ndim = 3; ct.shape[0] = num_blocks; ct.shape[1] = block_size; ct.shape[2] = cache_stride;
    ct.strides[0] = block_size * cache_stride; ct.strides[1] = cache_stride; ct.strides[2] = 1;
    ct.numel_ = num_blocks * block_size * cache_stride; ct.dtype_ = AITER_DTYPE_u8; ct.device_id = 0;
    st.ptr = slot_mapping; st.ndim = 1; st.shape[0] = num_tokens; st.strides[0] = 1; st.numel_ = num_tokens;
    st.dtype_ = AITER_DTYPE_i64; st.device_id = 0;
    aiter::indexer_k_quant_and_cache(kt, ct, st, quant_block_size, std::string(scale_fmt), preshuffle != 0);
    return (int)hipGetLastError();
}
"""

_TORCH_ENTRY = "namespace aiter {}\n" + _SIGNATURE + """
{
    (void)preshuffle;  // this form has no preshuffle: the caller applies shuffle_weight
    auto kt = torch::from_blob(k, {num_tokens, head_dim}, torch::dtype(torch::kBFloat16));
    auto ct = torch::from_blob(kv_cache, {num_blocks, block_size, cache_stride}, torch::dtype(torch::kUInt8));
    auto st = torch::from_blob(slot_mapping, {num_tokens}, torch::dtype(torch::kInt64));
    using namespace aiter;  // the host function is global in some releases, in namespace aiter in others
    indexer_k_quant_and_cache(kt, ct, st, quant_block_size, std::string(scale_fmt));
    return (int)hipGetLastError();
}
"""

# aiter's JIT flags for this module (aiter/jit/core.py, optCompilerConfig.json "module_cache"): FP8 on,
# ROCm paths; Composable Kernel off where the release can do without it.
ENTRIES = {
    Form.TENSOR_PRESHUFFLE: Entry(_TENSOR_ENTRY, ("USE_ROCM=1", "ENABLE_FP8", "ENABLE_CK=0", "AITER_NO_TORCH_TYPES")),
    Form.TORCH: Entry(_TORCH_ENTRY, ("USE_ROCM=1", "ENABLE_FP8", "__HIP_PLATFORM_AMD__=1"),
                      ("csrc/include/ck_tile", "3rdparty/composable_kernel/include"), torch=True),
}
