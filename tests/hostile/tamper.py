"""Writers that attack the tensors they were handed instead of (or besides) writing bytes."""

import os
import time

import torch

from fp8check.writers.reference import aiter_writer


def _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout):
    aiter_writer(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype=fp8_dtype, layout=layout)


def free_storage(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.untyped_storage().resize_(0)  # in-process: the checker's own buffer would be freed


def rebind(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    kv_cache.data = torch.zeros_like(kv_cache)  # re-points its argument only, writes nothing


def modifies_k(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
               layout=None):
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    k.mul_(2)


def modifies_slot_mapping(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *,
                          fp8_dtype=torch.float8_e4m3fn, layout=None):
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    slot_mapping.fill_(-1)


def writes_later(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, *, fp8_dtype=torch.float8_e4m3fn,
                 layout=None):
    """Writes correct bytes and returns, leaving a process behind that zeroes the cache 0.3 s later,
    while the checker is diffing."""
    _correct(k, kv_cache, slot_mapping, quant_block_size, scale_fmt, fp8_dtype, layout)
    if os.fork() == 0:
        os.setsid()  # out of the child's process group
        time.sleep(0.3)
        kv_cache.zero_()
        os._exit(0)


def forges_a_report(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    """Sends fp8check's "ok" status itself, then ends the process with an error code."""
    import json

    from fp8check import isolation

    isolation._CONN.send_bytes(json.dumps({"status": "ok", "report": {}}).encode())
    os._exit(3)


def floods_the_pipe(k, kv_cache, slot_mapping, quant_block_size, scale_fmt):
    from fp8check import isolation

    isolation._CONN.send_bytes(b"x" * (4 << 20))
