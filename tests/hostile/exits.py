"""Writers that end the process instead of returning."""

import os
import sys

import torch

from fp8check.core.reference import aiter_writer


def exit0(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    sys.exit(0)


def exit1(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    sys.exit(1)  # in-process this looked like "bytes differ"


def hard_exit0(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    os._exit(0)  # no SystemExit, no report: the process is simply gone


def write_then_exit0(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                     layout=None):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)
    sys.exit(0)  # correct bytes, but it never returned: not a pass
